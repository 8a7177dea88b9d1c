// A live process group: the c10d objects plus one dedicated thread.
//
// Why not one AsyncWorker per collective: collectives can wait for a long time
// (a barrier waits for the slowest rank), and parking them on libuv's 4-thread
// pool would starve fs/dns/zlib work. Each group instead owns one thread that
//   - hands every queued collective to c10d strictly in call order (every rank
//     must issue the same sequence), so ops queued together are in flight
//     together, and then
//   - waits for the oldest one with a deadline, and loops.
// One thread rather than an issuer/waiter pair saves a thread wake-up per op,
// which is most of the cost of small collectives on a busy machine.
// The per-op data is still a plain baton (CollectiveBaton): it is filled on the
// JS thread, the group thread touches only the baton, and the completion is
// delivered back to the JS thread through one ThreadSafeFunction.
#pragma once
#include <napi.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>
// libtorch 2.x split the process group into a dispatcher (ProcessGroup) and
// the per-backend object (Backend) that gloo and NCCL derive from; 1.13 (the
// Debian package) has ProcessGroup only. The ops used here are the same
// virtual methods on both.
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace logd {

#if TORCH_VERSION_MAJOR >= 2
using BackendPtr = c10::intrusive_ptr<c10d::Backend>;
#else
using BackendPtr = c10::intrusive_ptr<c10d::ProcessGroup>;
#endif

enum class OpKind { AllReduce, Broadcast, AllGather, ReduceScatter, Barrier, Destroy };

// Everything one collective needs; no Napi types in here.
struct CollectiveBaton {
  OpKind kind = OpKind::Barrier;
  std::vector<at::Tensor> inputs;   // allReduce/broadcast: the tensor itself
  std::vector<at::Tensor> outputs;  // allGather: worldSize views into the output
  // NCCL only: the host views above, while inputs/outputs are device copies.
  std::vector<at::Tensor> hostInputs, hostOutputs;
  c10d::ReduceOp reduceOp = c10d::ReduceOp::SUM;
  bool averageAfterSum = false;  // gloo has no AVG: sum, then divide
  int64_t root = 0;
  c10::intrusive_ptr<c10d::Work> work;
  std::string errorName;  // empty on success
  std::string errorMessage;
  bool abandoned = false;  // we stopped waiting but c10d may still touch the memory
};

// JS-thread side of one pending op: the promise and the typed arrays kept
// alive until the collective completes (the tensors point into their memory).
struct PendingOp {
  std::unique_ptr<CollectiveBaton> baton;
  Napi::Promise::Deferred deferred;
  std::vector<Napi::Reference<Napi::Value>> keepAlive;
  std::shared_ptr<class GroupState> owner;  // keeps the group alive until delivery
  uint64_t seq = 0;                          // call order within the group
  explicit PendingOp(Napi::Env env) : baton(new CollectiveBaton()), deferred(Napi::Promise::Deferred::New(env)) {}
};

class GroupState : public std::enable_shared_from_this<GroupState> {
 public:
  GroupState(c10::intrusive_ptr<c10d::Store> store, BackendPtr pg,
             std::string backend, int rank, int worldSize, std::chrono::milliseconds timeout,
             bool checkCollectives, int deviceIndex);
  // Starts the threads and the completion channel; call once, on the JS thread.
  void Start(Napi::Env env);
  // JS thread: queue an op (takes ownership). Returns its promise.
  Napi::Promise Submit(Napi::Env env, PendingOp* op);

  const std::string backend;
  const int rank;
  const int worldSize;
  const std::chrono::milliseconds timeout;
  // Before each collective, all-gather a fingerprint (kind, dtype, sizes,
  // root, op) so a mismatch rejects on every rank instead of gloo aborting
  // the process ("op.preamble.length <= op.nbytes") or hanging.
  const bool checkCollectives;
  const int deviceIndex;  // CUDA device for nccl (LOCAL_RANK); unused by gloo
  bool destroyRequested = false;  // JS thread only

 private:
  void Loop();
  void Issue(CollectiveBaton& b);
  void IssueDirect(PendingOp* op);
  void StageToDevice(CollectiveBaton& b);
  static void CopyBackToHost(CollectiveBaton& b);
  void CheckSameCollective(CollectiveBaton& b);
  void Complete(CollectiveBaton& b);
  void PostCompletion(PendingOp* op);
  static void OnCompletion(Napi::Env env, Napi::Function, std::nullptr_t*, PendingOp* op);
  void Deliver(Napi::Env env, std::unique_ptr<PendingOp> op);

  c10::intrusive_ptr<c10d::Store> store_;
  BackendPtr pg_;
  std::mutex mutex_;
  std::condition_variable queueCv_;
  std::deque<PendingOp*> queue_;  // submitted, not yet handed to c10d
  using Tsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, PendingOp, &GroupState::OnCompletion>;
  Tsfn tsfn_;
  int pendingOnJsThread_ = 0;  // JS thread only: refs the loop while > 0
  uint64_t nextSeq_ = 0;        // JS thread only
  uint64_t nextToDeliver_ = 0;  // JS thread only
  std::map<uint64_t, PendingOp*> finished_;  // JS thread only: done, waiting for predecessors
  // JS thread only: arrays of ops that timed out while c10d still held them;
  // released once destroy() has torn c10d down, so gloo never writes into
  // memory the GC has freed.
  std::vector<Napi::Reference<Napi::Value>> abandonedArrays_;
};

}  // namespace logd
