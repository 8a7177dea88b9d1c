#include "group.h"

#include "errors.h"

#ifdef LOGD_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <thread>

namespace logd {
namespace {
// A newer libtorch's ProcessGroupNCCL wants shutdown() before it is freed (else
// it warns at exit and aborts its communicators in the destructor); 1.13 has no
// such method. Chosen at compile time: shutdown() when it exists.
template <typename T>
auto ShutdownIfAvailable(T& pg, int) -> decltype(pg.shutdown(), void()) {
  pg.shutdown();
}
template <typename T>
void ShutdownIfAvailable(T&, long) {}
}  // namespace

GroupState::GroupState(c10::intrusive_ptr<c10d::Store> store, BackendPtr pg,
                       std::string backendName, int rankIn, int worldSizeIn, std::chrono::milliseconds timeoutIn, bool checkCollectivesIn, int deviceIndexIn)
    : backend(std::move(backendName)),
      rank(rankIn),
      worldSize(worldSizeIn),
      timeout(timeoutIn),
      checkCollectives(checkCollectivesIn),
      deviceIndex(deviceIndexIn),
      store_(std::move(store)),
      pg_(std::move(pg)) {}

void GroupState::Start(Napi::Env env) {
  tsfn_ = Tsfn::New(env, "logd-process-group", 0, 1, nullptr);
  // Idle groups must not keep the process alive; Submit refs while ops pend.
  tsfn_.Unref(env);
  auto self = shared_from_this();
  std::thread([self] { self->Loop(); }).detach();
}

Napi::Promise GroupState::Submit(Napi::Env env, PendingOp* op) {
  op->owner = shared_from_this();
  op->seq = nextSeq_++;
  Napi::Promise promise = op->deferred.Promise();
  if (op->baton->kind == OpKind::Destroy) destroyRequested = true;
  if (pendingOnJsThread_++ == 0) tsfn_.Ref(env);
  // NCCL's first op creates communicators (a blocking rendezvous), so only
  // gloo takes the JS-thread fast path.
  if (!checkCollectives && backend == "gloo" && op->baton->kind != OpKind::Destroy) {
    IssueDirect(op);
    return promise;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(op);
  }
  queueCv_.notify_one();
  return promise;
}

namespace {
constexpr int kFingerprintLen = 6;
const char* KindName(int64_t k) {
  static const char* names[] = {"allReduce", "broadcast", "allGather", "reduceScatter", "barrier", "destroy"};
  return k >= 0 && k < 6 ? names[k] : "?";
}
std::string Describe(const int64_t* f) {
  std::string s = KindName(f[0]);
  if (f[0] == static_cast<int64_t>(OpKind::Barrier)) return s + "()";
  s += "(" + std::to_string(f[2]) + " x " + c10::toString(static_cast<at::ScalarType>(f[1]));
  if (f[3] != f[2]) s += " -> " + std::to_string(f[3]);
  if (f[0] == static_cast<int64_t>(OpKind::Broadcast)) s += ", root " + std::to_string(f[4]);
  if (f[0] == static_cast<int64_t>(OpKind::AllReduce) || f[0] == static_cast<int64_t>(OpKind::ReduceScatter)) {
    static const char* ops[] = {"sum", "avg", "product", "min", "max"};
    const int64_t op = f[5] / 2;
    const std::string name = (f[5] & 1) ? std::string("avg") : (op >= 0 && op < 5 ? std::string(ops[op]) : "op " + std::to_string(op));
    s += ", " + name;
  }
  return s + ")";
}
}  // namespace

void GroupState::CheckSameCollective(CollectiveBaton& b) {
  at::Tensor mine = at::zeros({kFingerprintLen}, at::kLong);
  int64_t* f = mine.data_ptr<int64_t>();
  f[0] = static_cast<int64_t>(b.kind);
  if (!b.inputs.empty()) {
    f[1] = static_cast<int64_t>(b.inputs[0].scalar_type());
    f[2] = b.inputs[0].numel();
    f[3] = f[2];
    if (!b.outputs.empty()) f[3] = b.outputs[0].numel() * static_cast<int64_t>(b.outputs.size());
  }
  f[4] = b.root;
  f[5] = static_cast<int64_t>(b.reduceOp.op_) * 2 + (b.averageAfterSum ? 1 : 0);
  at::Tensor all = at::zeros({worldSize, kFingerprintLen}, at::kLong);
  const bool onDevice = backend == "nccl";  // NCCL only moves CUDA tensors
  const at::Device device(onDevice ? at::kCUDA : at::kCPU, onDevice ? static_cast<c10::DeviceIndex>(deviceIndex) : -1);
  at::Tensor gathered = onDevice ? all.to(device) : all;
  std::vector<at::Tensor> in{onDevice ? mine.to(device) : mine};
  std::vector<std::vector<at::Tensor>> out(1, gathered.unbind(0));
  c10d::AllgatherOptions o;
  o.timeout = timeout;
  pg_->allgather(out, in, o)->wait(timeout);
  if (onDevice) all.copy_(gathered);
  const int64_t* rows = all.data_ptr<int64_t>();
  bool same = true;
  for (int r = 0; r < worldSize && same; ++r)
    same = std::equal(f, f + kFingerprintLen, rows + r * kFingerprintLen);
  if (same) return;
  std::string msg = "ranks called different collectives at the same point (every rank must issue the same sequence):";
  for (int r = 0; r < worldSize; ++r) msg += " rank " + std::to_string(r) + ": " + Describe(rows + r * kFingerprintLen) + ";";
  msg.back() = '.';
  b.errorName = kInvalidArgument;
  b.errorMessage = msg;
}

// NCCL works on CUDA tensors only: copy the host arrays to this rank's device
// before the op, and the results back after it (typed arrays stay the API).
// Untested in CI (no GPU); gloo never takes this path.
void GroupState::StageToDevice(CollectiveBaton& b) {
  const at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(deviceIndex));
  b.hostInputs = b.inputs;
  b.hostOutputs = b.outputs;
  for (auto& t : b.inputs) t = t.to(device);
  for (auto& t : b.outputs) t = b.kind == OpKind::AllGather ? at::empty_like(t, t.options().device(device)) : t.to(device);
}

void GroupState::CopyBackToHost(CollectiveBaton& b) {
  if (b.kind == OpKind::AllGather) {
    for (size_t i = 0; i < b.hostOutputs.size(); ++i) b.hostOutputs[i].copy_(b.outputs[i]);
  } else {
    for (size_t i = 0; i < b.hostInputs.size(); ++i) b.hostInputs[i].copy_(b.inputs[i]);
  }
}

void GroupState::Issue(CollectiveBaton& b) {
  try {
    if (checkCollectives) {
      CheckSameCollective(b);
      if (!b.errorName.empty()) return;
    }
    if (backend == "nccl") StageToDevice(b);
    switch (b.kind) {
      case OpKind::AllReduce: {
        c10d::AllreduceOptions o;
        o.reduceOp = b.reduceOp;
        o.timeout = timeout;
        b.work = pg_->allreduce(b.inputs, o);
        break;
      }
      case OpKind::Broadcast: {
        c10d::BroadcastOptions o;
        o.rootRank = b.root;
        o.timeout = timeout;
        b.work = pg_->broadcast(b.inputs, o);
        break;
      }
      case OpKind::AllGather: {
        std::vector<std::vector<at::Tensor>> outs{b.outputs};
        c10d::AllgatherOptions o;
        o.timeout = timeout;
        b.work = pg_->allgather(outs, b.inputs, o);
        break;
      }
      case OpKind::ReduceScatter: {
        std::vector<std::vector<at::Tensor>> ins{b.outputs};  // outputs holds the input chunks here
        c10d::ReduceScatterOptions o;
        o.reduceOp = b.reduceOp;
        o.timeout = timeout;
        b.work = pg_->reduce_scatter(b.inputs, ins, o);
        break;
      }
      case OpKind::Barrier: {
        c10d::BarrierOptions o;
        o.timeout = timeout;
        b.work = pg_->barrier(o);
        break;
      }
      case OpKind::Destroy:
        break;
    }
  } catch (const std::exception& e) {
    b.errorName = ClassifyNativeFailure(e.what(), kNative);
    b.errorMessage = FirstParagraph(e.what());
  }
}

void GroupState::Complete(CollectiveBaton& b) {
  if (!b.errorName.empty() || !b.work) return;
  try {
    // Work::wait throws "Operation timed out!" at the deadline; gloo's own
    // timeout (same value) usually fires first with a more precise message.
    b.work->wait(timeout);
    CopyBackToHost(b);
    if (b.averageAfterSum) {
      at::Tensor& t = b.inputs[0];
      if (at::isFloatingType(t.scalar_type())) t.div_(worldSize);
      else t.div_(worldSize, "trunc");
    }
  } catch (const std::exception& e) {
    b.errorName = ClassifyNativeFailure(e.what(), kNative);
    b.errorMessage = FirstParagraph(e.what());
    b.abandoned = !b.work->isCompleted();
    if (b.errorName == kTimeout && b.errorMessage.find("Operation timed out") != std::string::npos)
      b.errorMessage = "collective did not complete within " + std::to_string(timeout.count()) +
                       " ms (a peer is slow, stuck or gone)";
  }
  b.work.reset();
}

// Fast path (checkCollectives off): gloo's enqueue does not block, so the op
// is handed to c10d right here on the JS thread, in call order, and its
// future's callback (on a gloo worker thread) posts the completion, and
// OnCompletion puts completions back in call order. Two thread hops per op, as in torch.distributed, instead of
// four through the group thread. Deadlines come from gloo's own timeout,
// which is set to timeoutMs. The work holds the tensors until gloo is done
// with them, so nothing is ever abandoned on this path.
void GroupState::IssueDirect(PendingOp* op) {
  CollectiveBaton& b = *op->baton;
  Issue(b);
  if (!b.errorName.empty() || !b.work) {
    PostCompletion(op);
    return;
  }
  b.work->getFuture()->addCallback([op, worldSize = worldSize](c10::ivalue::Future& future) {
    CollectiveBaton& done = *op->baton;
    if (future.hasError()) {
      std::string what = future.tryRetrieveErrorMessage();
      done.errorName = ClassifyNativeFailure(what, kNative);
      done.errorMessage = FirstParagraph(what);
    } else if (done.averageAfterSum) {
      at::Tensor& t = done.inputs[0];
      if (at::isFloatingType(t.scalar_type())) t.div_(worldSize);
      else t.div_(worldSize, "trunc");
    }
    op->owner->PostCompletion(op);
  });
}

void GroupState::Loop() {
  std::deque<PendingOp*> inFlight;  // issued to c10d, oldest first
  for (;;) {
    std::deque<PendingOp*> fresh;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (inFlight.empty()) queueCv_.wait(lock, [&] { return !queue_.empty(); });
      fresh.swap(queue_);
    }
    for (PendingOp* op : fresh) {
      if (op->baton->kind != OpKind::Destroy) Issue(*op->baton);
      inFlight.push_back(op);
    }
    PendingOp* op = inFlight.front();
    inFlight.pop_front();
    if (op->baton->kind == OpKind::Destroy) {
      // JS refuses ops after destroy(), so this is the last one and every
      // earlier op has completed or failed: freeing c10d cannot outlast their
      // deadlines, and it happens here, never on the JS thread.
      try {
#ifdef LOGD_WITH_NCCL
        if (auto* nccl = dynamic_cast<c10d::ProcessGroupNCCL*>(pg_.get())) ShutdownIfAvailable(*nccl, 0);
#endif
        pg_.reset();
        store_.reset();
      } catch (const std::exception& e) {
        op->baton->errorName = kNative;
        op->baton->errorMessage = FirstParagraph(e.what());
      }
      PostCompletion(op);
      return;
    }
    Complete(*op->baton);
    PostCompletion(op);
  }
}

void GroupState::PostCompletion(PendingOp* op) {
  // Only fails once the function is released, which happens after the last op.
  tsfn_.NonBlockingCall(op);
}

void GroupState::OnCompletion(Napi::Env env, Napi::Function, std::nullptr_t*, PendingOp* op) {
  if (env == nullptr) {  // environment is shutting down: nothing left to resolve
    for (auto& ref : op->keepAlive) ref.SuppressDestruct();
    delete op;
    return;
  }
  // gloo's two workers may finish ops out of order; promises settle in call
  // order, so hold early finishers until their predecessors are delivered.
  std::shared_ptr<GroupState> group = op->owner;
  group->finished_.emplace(op->seq, op);
  for (auto it = group->finished_.begin(); it != group->finished_.end() && it->first == group->nextToDeliver_;
       it = group->finished_.erase(it)) {
    ++group->nextToDeliver_;
    group->Deliver(env, std::unique_ptr<PendingOp>(it->second));
  }
}

void GroupState::Deliver(Napi::Env env, std::unique_ptr<PendingOp> op) {
  Napi::HandleScope scope(env);
  CollectiveBaton& b = *op->baton;
  if (b.errorName.empty()) {
    op->deferred.Resolve(env.Undefined());
  } else {
    op->deferred.Reject(MakeNamedError(env, b.errorName, b.errorMessage).Value());
  }
  for (auto& ref : op->keepAlive) {
    if (b.abandoned) abandonedArrays_.push_back(std::move(ref));
    else ref.Reset();
  }
  if (b.kind == OpKind::Destroy) abandonedArrays_.clear();
  b.inputs.clear();
  b.outputs.clear();
  if (--pendingOnJsThread_ == 0) tsfn_.Unref(env);
  if (b.kind == OpKind::Destroy) tsfn_.Release();
}

}  // namespace logd
