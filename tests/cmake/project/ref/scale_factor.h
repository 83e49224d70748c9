// The factor of ref::scale: a project header the reference includes (its edits make entries stale).
#pragma once
namespace ref {
constexpr int kScaleFactor = 2;
}  // namespace ref
