#pragma once
#include <napi.h>

namespace logd {
Napi::Value InitProcessGroup(const Napi::CallbackInfo& info);
Napi::Value BuildInfo(const Napi::CallbackInfo& info);
}  // namespace logd
