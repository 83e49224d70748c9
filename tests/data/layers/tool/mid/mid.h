#pragma once
#include <CLI/CLI.hpp>  // CLI11 outside its parts: reported
#include "low/low.h"
