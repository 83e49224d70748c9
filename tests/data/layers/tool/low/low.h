#pragma once
#include "high/high.h"  // upwards: reported
