// initProcessGroup: one AsyncWorker + baton. Rendezvous (TCPStore/FileStore)
// and gloo's full-mesh connect block until every rank arrives or the timeout
// passes; that one-off wait runs on the libuv pool, bounded by timeoutMs.
#include "init.h"

#include "errors.h"
#include "group.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef LOGD_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef LOGD_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <torch/version.h>

#include <algorithm>
#include <cstdlib>

namespace logd {
namespace {

struct InitBaton {
  std::string backend;  // "gloo" | "nccl"
  int rank = 0;
  int worldSize = 1;
  std::string storeKind;  // "tcp" | "file"
  std::string host;
  int port = 0;
  std::string path;
  std::chrono::milliseconds timeout{30000};
  bool checkCollectives = true;
  int localRank = 0;
  std::string errorName;
  c10::intrusive_ptr<c10d::Store> store;
  BackendPtr pg;
};

#ifdef LOGD_WITH_GLOO
std::shared_ptr<::gloo::transport::Device> GlooDevice(const InitBaton& b) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  // Single-node jobs rendezvous on loopback; binding gloo there avoids
  // depending on the container's hostname resolving.
  if (b.storeKind == "file" || b.host == "localhost" || b.host.rfind("127.", 0) == 0) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}
#endif

class InitWorker : public Napi::AsyncWorker {
 public:
  InitWorker(Napi::Env env, std::unique_ptr<InitBaton> baton)
      : Napi::AsyncWorker(env, "logd:initProcessGroup"), baton_(std::move(baton)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    InitBaton& b = *baton_;
#ifndef LOGD_WITH_NCCL
    if (b.backend == "nccl") {
      b.errorName = kNotSupported;
      SetError("backend 'nccl' is not compiled in: this libtorch has no CUDA. Use backend 'gloo', or build "
               "against a CUDA libtorch (LOGD_TORCH_PREFIX) and re-run `make native`");
      return;
    }
#endif
#ifndef LOGD_WITH_GLOO
    if (b.backend == "gloo") {
      b.errorName = kNotSupported;
      SetError("backend 'gloo' is not compiled in: this addon was built with LOGD_WITH_GLOO=OFF (no gloo headers in "
               "this libtorch). Use backend 'nccl', or install libgloo-dev and re-run `make native`");
      return;
    }
#endif
    const char* stage = "rendezvous";
    auto t0 = std::chrono::steady_clock::now();
    try {
      c10::intrusive_ptr<c10d::Store> base;
      if (b.storeKind == "tcp") {
        c10d::TCPStoreOptions o;
        o.port = static_cast<std::uint16_t>(b.port);
        o.isServer = b.rank == 0;
        o.numWorkers = b.worldSize;
        // gloo's connect below waits for every rank anyway; the server's own
        // wait-for-workers overshoots the timeout by about a second.
        o.waitWorkers = false;
        o.timeout = b.timeout;
        base = c10::make_intrusive<c10d::TCPStore>(b.host, o);
      } else {
        base = c10::make_intrusive<c10d::FileStore>(b.path, b.worldSize);
        base->setTimeout(b.timeout);
      }
      auto store = c10::make_intrusive<c10d::PrefixStore>("logd/0/", base);
      // One deadline for the whole init: gloo's full-mesh connect gets what
      // the store rendezvous left of it.
      auto left = b.timeout - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
      base->setTimeout(std::max(left, std::chrono::milliseconds(1)));
      stage = "connecting the process group";
      if (b.backend == "gloo") {
#ifdef LOGD_WITH_GLOO
        auto opts = c10d::ProcessGroupGloo::Options::create(b.timeout);
        opts->devices.push_back(GlooDevice(b));
        b.pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, b.rank, b.worldSize, opts);
#endif
      } else {
#ifdef LOGD_WITH_NCCL
        auto opts = c10d::ProcessGroupNCCL::Options::create();
        opts->timeout = b.timeout;
        b.pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, b.rank, b.worldSize, opts);
#endif
      }
      b.store = base;
    } catch (const std::exception& e) {
      const char* name = ClassifyNativeFailure(e.what(), kInit);
      std::string cause = FirstParagraph(e.what());
      while (!cause.empty() && cause.back() == '.') cause.pop_back();
      b.errorName = name == kTimeout ? kTimeout : kInit;
      SetError(std::string("initProcessGroup failed while ") + stage + " (rank " + std::to_string(b.rank) + " of " +
               std::to_string(b.worldSize) + ", timeout " + std::to_string(b.timeout.count()) +
               " ms): " + cause +
               ". Check that every rank starts with the same MASTER_ADDR/MASTER_PORT and WORLD_SIZE.");
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    InitBaton& b = *baton_;
    auto group = std::make_shared<GroupState>(b.store, b.pg, b.backend, b.rank, b.worldSize, b.timeout,
                                              b.checkCollectives, b.localRank);
    group->Start(env);
    auto* box = new std::shared_ptr<GroupState>(std::move(group));
    auto handle = Napi::External<std::shared_ptr<GroupState>>::New(
        env, box, [](Napi::Env, std::shared_ptr<GroupState>* p) { delete p; });
    deferred_.Resolve(handle);
  }

  void OnError(const Napi::Error& e) override {
    Napi::Env env = Env();
    deferred_.Reject(MakeNamedError(env, baton_->errorName.empty() ? kInit : baton_->errorName, e.Message()).Value());
  }

 private:
  std::unique_ptr<InitBaton> baton_;
  Napi::Promise::Deferred deferred_;
};

std::string GetString(Napi::Object o, const char* key) {
  Napi::Value v = o.Get(key);
  if (!v.IsString()) ThrowInvalid(o.Env(), std::string("initProcessGroup: '") + key + "' must be a string");
  return v.As<Napi::String>().Utf8Value();
}
int64_t GetInt(Napi::Object o, const char* key) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber()) ThrowInvalid(o.Env(), std::string("initProcessGroup: '") + key + "' must be a number");
  return v.As<Napi::Number>().Int64Value();
}

}  // namespace

// (options: NativeInitOptions) => Promise<NativeGroupHandle>
Napi::Value InitProcessGroup(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) ThrowInvalid(env, "initProcessGroup: expected an options object");
  Napi::Object o = info[0].As<Napi::Object>();
  auto b = std::make_unique<InitBaton>();
  b->backend = GetString(o, "backend");
  b->rank = static_cast<int>(GetInt(o, "rank"));
  b->worldSize = static_cast<int>(GetInt(o, "worldSize"));
  b->storeKind = GetString(o, "storeKind");
  b->timeout = std::chrono::milliseconds(GetInt(o, "timeoutMs"));
  Napi::Value check = o.Get("checkCollectives");
  if (!check.IsBoolean()) ThrowInvalid(env, "initProcessGroup: 'checkCollectives' must be a boolean");
  b->checkCollectives = check.As<Napi::Boolean>().Value();
  b->localRank = static_cast<int>(GetInt(o, "localRank"));
  if (b->storeKind == "tcp") {
    b->host = GetString(o, "host");
    b->port = static_cast<int>(GetInt(o, "port"));
  } else {
    b->path = GetString(o, "path");
  }
  auto* worker = new InitWorker(env, std::move(b));
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// () => NativeBuildInfo
Napi::Value BuildInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  Napi::Array backends = Napi::Array::New(env);
  uint32_t n = 0;
#ifdef LOGD_WITH_GLOO
  backends.Set(n++, Napi::String::New(env, "gloo"));
#endif
#ifdef LOGD_WITH_NCCL
  backends.Set(n++, Napi::String::New(env, "nccl"));
#endif
  o.Set("backends", backends);
  o.Set("torchVersion", Napi::String::New(env, TORCH_VERSION));
  return o;
}

}  // namespace logd
