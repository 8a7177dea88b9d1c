// Registration only. The order here is the order of NativeBinding in
// native/types.ts; keep them in step.
#include <napi.h>

#include "init.h"
#include "ops.h"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("buildInfo", Napi::Function::New(env, logd::BuildInfo, "buildInfo"));
  exports.Set("initProcessGroup", Napi::Function::New(env, logd::InitProcessGroup, "initProcessGroup"));
  exports.Set("allReduce", Napi::Function::New(env, logd::AllReduce, "allReduce"));
  exports.Set("broadcast", Napi::Function::New(env, logd::Broadcast, "broadcast"));
  exports.Set("allGather", Napi::Function::New(env, logd::AllGather, "allGather"));
  exports.Set("reduceScatter", Napi::Function::New(env, logd::ReduceScatter, "reduceScatter"));
  exports.Set("barrier", Napi::Function::New(env, logd::Barrier, "barrier"));
  exports.Set("destroy", Napi::Function::New(env, logd::Destroy, "destroy"));
  return exports;
}

NODE_API_MODULE(logd_native, Init)
