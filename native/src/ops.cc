// JS entry points for collectives. Each copies its arguments into a
// CollectiveBaton on the JS thread (tensors are zero-copy views of the typed
// arrays, which stay referenced until completion) and queues it on the group.
#include "ops.h"

#include "errors.h"
#include "group.h"

namespace logd {
namespace {

std::shared_ptr<GroupState> GroupArg(const Napi::CallbackInfo& info, const char* fn) {
  if (info.Length() < 1 || !info[0].IsExternal())
    ThrowInvalid(info.Env(), std::string(fn) + ": first argument must be a process group handle");
  auto group = *info[0].As<Napi::External<std::shared_ptr<GroupState>>>().Data();
  if (group->destroyRequested)
    throw MakeNamedError(info.Env(), kDestroyed,
                         std::string(fn) + ": the process group was destroyed; create a new one with initProcessGroup()");
  return group;
}

// Float32Array | Float64Array | Int32Array -> a tensor over the same memory.
at::Tensor TensorArg(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* what, PendingOp& op) {
  Napi::Env env = info.Env();
  if (info.Length() <= index || !info[index].IsTypedArray())
    ThrowInvalid(env, std::string(fn) + ": " + what + " must be a Float32Array, Float64Array or Int32Array");
  Napi::TypedArray ta = info[index].As<Napi::TypedArray>();
  at::ScalarType type;
  switch (ta.TypedArrayType()) {
    case napi_float32_array: type = at::kFloat; break;
    case napi_float64_array: type = at::kDouble; break;
    case napi_int32_array: type = at::kInt; break;
    default:
      ThrowInvalid(env, std::string(fn) + ": " + what + " must be a Float32Array, Float64Array or Int32Array");
  }
  if (ta.ElementLength() == 0) ThrowInvalid(env, std::string(fn) + ": " + what + " is empty");
  auto* base = static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
  op.keepAlive.push_back(Napi::Persistent(info[index]));
  return at::from_blob(base, {static_cast<int64_t>(ta.ElementLength())}, at::TensorOptions().dtype(type));
}

c10d::ReduceOp ReduceOpArg(const Napi::CallbackInfo& info, size_t index, const GroupState& g, CollectiveBaton& b) {
  std::string op = info.Length() > index && info[index].IsString() ? info[index].As<Napi::String>().Utf8Value() : "";
  if (op == "sum") return c10d::ReduceOp::SUM;
  if (op == "min") return c10d::ReduceOp::MIN;
  if (op == "max") return c10d::ReduceOp::MAX;
  if (op == "product") return c10d::ReduceOp::PRODUCT;
  if (op == "avg") {
    if (g.backend == "gloo") {  // gloo rejects AVG: sum, then divide by worldSize
      b.averageAfterSum = true;
      return c10d::ReduceOp::SUM;
    }
    return c10d::ReduceOp::AVG;
  }
  ThrowInvalid(info.Env(), "reduce op must be one of sum, avg, min, max, product (got '" + op + "')");
}

Napi::Value Submit(const Napi::CallbackInfo& info, GroupState& g, std::unique_ptr<PendingOp> op) {
  return g.Submit(info.Env(), op.release());
}

}  // namespace

// (group, tensor, op) => Promise<void>
Napi::Value AllReduce(const Napi::CallbackInfo& info) {
  auto g = GroupArg(info, "allReduce");
  auto op = std::make_unique<PendingOp>(info.Env());
  CollectiveBaton& b = *op->baton;
  b.kind = OpKind::AllReduce;
  b.inputs.push_back(TensorArg(info, 1, "allReduce", "tensor", *op));
  b.reduceOp = ReduceOpArg(info, 2, *g, b);
  return Submit(info, *g, std::move(op));
}

// (group, tensor, root) => Promise<void>
Napi::Value Broadcast(const Napi::CallbackInfo& info) {
  auto g = GroupArg(info, "broadcast");
  auto op = std::make_unique<PendingOp>(info.Env());
  CollectiveBaton& b = *op->baton;
  b.kind = OpKind::Broadcast;
  b.inputs.push_back(TensorArg(info, 1, "broadcast", "tensor", *op));
  if (info.Length() < 3 || !info[2].IsNumber()) ThrowInvalid(info.Env(), "broadcast: root must be a rank number");
  b.root = info[2].As<Napi::Number>().Int64Value();
  if (b.root < 0 || b.root >= g->worldSize)
    ThrowInvalid(info.Env(), "broadcast: root " + std::to_string(b.root) + " is outside 0.." + std::to_string(g->worldSize - 1));
  return Submit(info, *g, std::move(op));
}

// Splits `whole` into worldSize equal views; validates the size relation.
static std::vector<at::Tensor> Chunks(const Napi::CallbackInfo& info, const char* fn, const at::Tensor& whole,
                                      const at::Tensor& part, const GroupState& g) {
  if (whole.scalar_type() != part.scalar_type())
    ThrowInvalid(info.Env(), std::string(fn) + ": output and input must have the same element type");
  if (whole.numel() != part.numel() * g.worldSize)
    ThrowInvalid(info.Env(), std::string(fn) + ": the gathered array must hold worldSize (" + std::to_string(g.worldSize) +
                                 ") x " + std::to_string(part.numel()) + " elements, got " + std::to_string(whole.numel()));
  return whole.chunk(g.worldSize);
}

// (group, output, input) => Promise<void>; output.length == input.length * worldSize
Napi::Value AllGather(const Napi::CallbackInfo& info) {
  auto g = GroupArg(info, "allGather");
  auto op = std::make_unique<PendingOp>(info.Env());
  CollectiveBaton& b = *op->baton;
  b.kind = OpKind::AllGather;
  at::Tensor output = TensorArg(info, 1, "allGather", "output", *op);
  b.inputs.push_back(TensorArg(info, 2, "allGather", "input", *op));
  b.outputs = Chunks(info, "allGather", output, b.inputs[0], *g);
  return Submit(info, *g, std::move(op));
}

// (group, output, input, op) => Promise<void>; input.length == output.length * worldSize
Napi::Value ReduceScatter(const Napi::CallbackInfo& info) {
  auto g = GroupArg(info, "reduceScatter");
  auto op = std::make_unique<PendingOp>(info.Env());
  CollectiveBaton& b = *op->baton;
  b.kind = OpKind::ReduceScatter;
  b.inputs.push_back(TensorArg(info, 1, "reduceScatter", "output", *op));
  at::Tensor input = TensorArg(info, 2, "reduceScatter", "input", *op);
  b.outputs = Chunks(info, "reduceScatter", input, b.inputs[0], *g);
  b.reduceOp = ReduceOpArg(info, 3, *g, b);
  if (b.averageAfterSum) ThrowInvalid(info.Env(), "reduceScatter: op 'avg' is not available on gloo");
  return Submit(info, *g, std::move(op));
}

// (group) => Promise<void>
Napi::Value Barrier(const Napi::CallbackInfo& info) {
  auto g = GroupArg(info, "barrier");
  auto op = std::make_unique<PendingOp>(info.Env());
  op->baton->kind = OpKind::Barrier;
  return Submit(info, *g, std::move(op));
}

// (group) => Promise<void>; runs after every earlier op, off the JS thread
Napi::Value Destroy(const Napi::CallbackInfo& info) {
  auto g = GroupArg(info, "destroy");
  auto op = std::make_unique<PendingOp>(info.Env());
  op->baton->kind = OpKind::Destroy;
  return Submit(info, *g, std::move(op));
}

}  // namespace logd
