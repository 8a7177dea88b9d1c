// Error names shared by every native entry point. Each maps 1:1 to a TS error
// class in native/errors.ts; the classification runs on worker threads, so it
// works on plain strings and never touches Napi.
#pragma once
#include <napi.h>
#include <string>

namespace logd {

inline constexpr const char* kInvalidArgument = "InvalidArgumentError";
inline constexpr const char* kTimeout = "CollectiveTimeoutError";
inline constexpr const char* kPeerLost = "PeerLostError";
inline constexpr const char* kNotSupported = "NotSupportedError";
inline constexpr const char* kDestroyed = "ProcessGroupDestroyedError";
inline constexpr const char* kInit = "InitProcessGroupError";
inline constexpr const char* kNative = "LogdNativeError";

// c10d/gloo only give us what() strings; pick the most useful name from them.
inline const char* ClassifyNativeFailure(const std::string& what, const char* fallback) {
  auto has = [&](const char* s) { return what.find(s) != std::string::npos; };
  if (has("does not support") || has("Cannot use ReduceOp") || has("not supported")) return kNotSupported;
  if (has("Timed out") || has("timed out") || has("Timeout") || has("timeout")) return kTimeout;
  if (has("closed by peer") || has("reset by peer") || has("Broken pipe") || has("Connection refused") ||
      has("Connection closed") || has("ECONNRESET") || has("Socket closed"))
    return kPeerLost;
  return fallback;
}

// c10::Error messages carry a C++ backtrace after the first line; JS users
// want the first paragraph only.
inline std::string FirstParagraph(const std::string& what) {
  auto cut = what.find("\nException raised from");
  std::string s = cut == std::string::npos ? what : what.substr(0, cut);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

inline Napi::Error MakeNamedError(Napi::Env env, const std::string& name, const std::string& message) {
  Napi::Error err = Napi::Error::New(env, message);
  err.Set("name", Napi::String::New(env, name));
  return err;
}

[[noreturn]] inline void ThrowInvalid(Napi::Env env, const std::string& message) {
  throw MakeNamedError(env, kInvalidArgument, message);
}

}  // namespace logd
