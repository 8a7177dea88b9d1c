#pragma once
#include <napi.h>

namespace logd {
Napi::Value AllReduce(const Napi::CallbackInfo& info);
Napi::Value Broadcast(const Napi::CallbackInfo& info);
Napi::Value AllGather(const Napi::CallbackInfo& info);
Napi::Value ReduceScatter(const Napi::CallbackInfo& info);
Napi::Value Barrier(const Napi::CallbackInfo& info);
Napi::Value Destroy(const Napi::CallbackInfo& info);
}  // namespace logd
