// ThreadSanitizer annotations for Debian's uninstrumented Abseil and gRPC libraries.
//
// Debian builds libabsl_synchronization without -fsanitize=thread, so TSan never sees an
// absl::Mutex being taken: every access made under one looks unordered, and gRPC (whose gpr_mu
// and grpc_core::Mutex are absl::Mutex) hands work between its threads with no happens-before
// that TSan can see. Linked into every binary of a TSan build (KPROF_SANITIZE=thread), this file
// defines the Mutex, CondVar and Notification entry points itself: the executable's
// definitions come first in symbol lookup, so calls from the project's code and from the
// gRPC and Abseil libraries all land here. Each forwards to the library's own definition
// (dlsym RTLD_NEXT) between TSan's mutex annotations, which is what Abseil does in a build
// of its own under TSan (ABSL_TSAN_MUTEX_PRE_LOCK and friends in mutex.cc).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpc/grpc.h"
#include "grpcpp/support/server_callback.h"

static_assert(ABSL_OPTION_USE_INLINE_NAMESPACE == 1,
              "the mangled names below assume Abseil's inline namespace");

namespace {

#define KPROF_TSAN_STR2(x) #x
#define KPROF_TSAN_STR(x) KPROF_TSAN_STR2(x)

// The library's definition of a member function, from its mangled name after
// "_ZN4absl<ns>" ("K" after "_ZN" for const members).
template <typename F>
F Real(const char* rest, bool is_const = false) {
  const std::string ns = KPROF_TSAN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name =
      std::string(is_const ? "_ZNK4absl" : "_ZN4absl") + std::to_string(ns.size()) + ns + rest;
  void* symbol = dlsym(RTLD_NEXT, name.c_str());
  if (symbol == nullptr) {
    std::fprintf(stderr, "kprof tsan annotations: %s not found in Abseil: %s\n", name.c_str(),
                 dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(symbol);
}

#define KPROF_REAL(type, rest, ...)                         \
  static const auto real = Real<type>(rest, ##__VA_ARGS__); \
  (void)0

using MutexFn = void (*)(absl::Mutex*);
using MutexBoolFn = bool (*)(absl::Mutex*);
using MutexCondFn = void (*)(absl::Mutex*, const absl::Condition&);
using MutexCondTimeoutFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Duration);
using MutexCondDeadlineFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Time);
using CondVarWaitFn = void (*)(absl::CondVar*, absl::Mutex*);
using CondVarTimeoutFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Duration);
using CondVarDeadlineFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Time);
using NotifyFn = void (*)(absl::Notification*);
using WaitFn = void (*)(const absl::Notification*);
using WaitTimeoutFn = bool (*)(const absl::Notification*, absl::Duration);
using WaitDeadlineFn = bool (*)(const absl::Notification*, absl::Time);

constexpr unsigned kRead = __tsan_mutex_read_lock;

// Abseil's own entry points call one another (WaitWithTimeout calls WaitWithDeadline, Notify
// takes a Mutex): only the outermost call of a thread is annotated.
thread_local int depth = 0;

struct Nested {
  Nested() { ++depth; }
  ~Nested() { --depth; }
  bool outer() const { return depth == 1; }
};

// A lock taken by `take`, which may fail only when `is_try` (it returns false then).
template <typename Take>
bool Locked(void* mu, unsigned flags, Take take) {
  const Nested nested;
  if (!nested.outer()) return take();
  __tsan_mutex_pre_lock(mu, flags);
  const bool ok = take();
  __tsan_mutex_post_lock(mu, ok ? flags : flags | __tsan_mutex_try_lock_failed, 0);
  return ok;
}

template <typename Give>
void Unlocked(void* mu, unsigned flags, Give give) {
  const Nested nested;
  if (!nested.outer()) return give();
  __tsan_mutex_pre_unlock(mu, flags);
  give();
  __tsan_mutex_post_unlock(mu, flags);
}

// A call that gives up a held lock and holds it again when it returns (Await, CondVar::Wait).
template <typename R, typename Call>
R Around(void* mu, Call call) {
  const Nested nested;
  if (!nested.outer()) return call();
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  const R r = call();
  __tsan_mutex_post_lock(mu, 0, 0);
  return r;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  KPROF_REAL(MutexFn, "5Mutex4LockEv");
  Locked(this, 0, [&] { return real(this), true; });
}

void Mutex::ReaderLock() {
  KPROF_REAL(MutexFn, "5Mutex10ReaderLockEv");
  Locked(this, kRead, [&] { return real(this), true; });
}

bool Mutex::TryLock() {
  KPROF_REAL(MutexBoolFn, "5Mutex7TryLockEv");
  return Locked(this, __tsan_mutex_try_lock, [&] { return real(this); });
}

bool Mutex::ReaderTryLock() {
  KPROF_REAL(MutexBoolFn, "5Mutex13ReaderTryLockEv");
  return Locked(this, kRead | __tsan_mutex_try_lock, [&] { return real(this); });
}

void Mutex::Unlock() {
  KPROF_REAL(MutexFn, "5Mutex6UnlockEv");
  Unlocked(this, 0, [&] { real(this); });
}

void Mutex::ReaderUnlock() {
  KPROF_REAL(MutexFn, "5Mutex12ReaderUnlockEv");
  Unlocked(this, kRead, [&] { real(this); });
}

void Mutex::LockWhen(const Condition& cond) {
  KPROF_REAL(MutexCondFn, "5Mutex8LockWhenERKNS0_9ConditionE");
  Locked(this, 0, [&] { return real(this, cond), true; });
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  KPROF_REAL(MutexCondFn, "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Locked(this, kRead, [&] { return real(this, cond), true; });
}

// The timed LockWhen variants hold the lock when they return, whether the condition came true.
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  KPROF_REAL(MutexCondTimeoutFn, "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool met = false;
  Locked(this, 0, [&] { return met = real(this, cond, timeout), true; });
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  KPROF_REAL(MutexCondDeadlineFn, "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met = false;
  Locked(this, 0, [&] { return met = real(this, cond, deadline), true; });
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  KPROF_REAL(MutexCondTimeoutFn,
             "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool met = false;
  Locked(this, kRead, [&] { return met = real(this, cond, timeout), true; });
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  KPROF_REAL(MutexCondDeadlineFn, "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met = false;
  Locked(this, kRead, [&] { return met = real(this, cond, deadline), true; });
  return met;
}

void Mutex::Await(const Condition& cond) {
  KPROF_REAL(MutexCondFn, "5Mutex5AwaitERKNS0_9ConditionE");
  Around<bool>(this, [&] { return real(this, cond), true; });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  KPROF_REAL(MutexCondTimeoutFn, "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Around<bool>(this, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  KPROF_REAL(MutexCondDeadlineFn, "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Around<bool>(this, [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  KPROF_REAL(CondVarWaitFn, "7CondVar4WaitEPNS0_5MutexE");
  Around<bool>(mu, [&] { return real(this, mu), true; });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  KPROF_REAL(CondVarTimeoutFn, "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return Around<bool>(mu, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  KPROF_REAL(CondVarDeadlineFn, "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return Around<bool>(mu, [&] { return real(this, mu, deadline); });
}

// Notify happens before every wait that it ends.
void Notification::Notify() {
  KPROF_REAL(NotifyFn, "12Notification6NotifyEv");
  const Nested nested;
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  KPROF_REAL(WaitFn, "12Notification19WaitForNotificationEv", true);
  const Nested nested;
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  KPROF_REAL(WaitTimeoutFn, "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  const Nested nested;
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  KPROF_REAL(WaitDeadlineFn, "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", true);
  const Nested nested;
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl

// gRPC's completion queues. A batch started with a tag happens before that tag's completion
// reaches the application: through grpc_completion_queue_next or _pluck, or, on a callback
// queue, through the tag's own functor_run, which gRPC calls from a thread of its own. gRPC
// orders those with atomics of its own, invisible here; grpc++'s inline code (CallOpSet,
// ByteBuffer) and the reactors' messages are compiled into the project's binaries and would
// race with themselves across that hand-off.
namespace {

using FunctorRun = void (*)(grpc_completion_queue_functor*, int);

std::mutex functors_mu;
std::unordered_map<void*, FunctorRun>& Functors() {
  static auto* functors = new std::unordered_map<void*, FunctorRun>;
  return *functors;
}

void RunAfterAcquire(grpc_completion_queue_functor* functor, int ok) {
  __tsan_acquire(functor);
  FunctorRun run;
  {
    const std::lock_guard<std::mutex> lock(functors_mu);
    run = Functors().at(functor);
  }
  run(functor, ok);
}

// grpc++'s callback tags (CallbackWithSuccessTag, CallbackWithStatusTag) are functors whose
// functor_run is a StaticRun: such a tag runs through RunAfterAcquire instead.
// The same tag may be started again from another thread, ordered by gRPC alone: its
// functor_run is read and swapped under functors_mu, which TSan sees.
void HookFunctor(void* tag) {
  auto* functor = static_cast<grpc_completion_queue_functor*>(tag);
  const std::lock_guard<std::mutex> lock(functors_mu);
  const FunctorRun run = functor->functor_run;
  if (run == &RunAfterAcquire) return;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(run), &info) == 0 || info.dli_sname == nullptr ||
      info.dli_saddr != reinterpret_cast<void*>(run) ||
      std::strstr(info.dli_sname, "StaticRun") == nullptr) {
    return;
  }
  Functors()[functor] = run;
  functor->functor_run = &RunAfterAcquire;
}

void Started(void* tag) {
  if (reinterpret_cast<uintptr_t>(tag) < 4096 || reinterpret_cast<uintptr_t>(tag) % 8 != 0) {
    return;
  }
  __tsan_release(tag);
  HookFunctor(tag);
}

template <typename F>
F RealC(const char* name) {
  void* symbol = dlsym(RTLD_NEXT, name);
  if (symbol == nullptr) {
    std::fprintf(stderr, "kprof tsan annotations: %s not found in gRPC: %s\n", name, dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(symbol);
}

grpc_event Completed(grpc_event event) {
  if (event.type == GRPC_OP_COMPLETE && event.tag != nullptr) __tsan_acquire(event.tag);
  return event;
}

}  // namespace

extern "C" {

grpc_call_error grpc_call_start_batch(grpc_call* call, const grpc_op* ops, size_t nops, void* tag,
                                      void* reserved) {
  static const auto real = RealC<decltype(&grpc_call_start_batch)>("grpc_call_start_batch");
  Started(tag);
  return real(call, ops, nops, tag, reserved);
}

grpc_event grpc_completion_queue_next(grpc_completion_queue* cq, gpr_timespec deadline,
                                      void* reserved) {
  static const auto real =
      RealC<decltype(&grpc_completion_queue_next)>("grpc_completion_queue_next");
  return Completed(real(cq, deadline, reserved));
}

grpc_event grpc_completion_queue_pluck(grpc_completion_queue* cq, void* tag, gpr_timespec deadline,
                                       void* reserved) {
  static const auto real =
      RealC<decltype(&grpc_completion_queue_pluck)>("grpc_completion_queue_pluck");
  return Completed(real(cq, tag, deadline, reserved));
}

}  // extern "C"

// A finished server call hands its reactor's OnDone to gRPC's executor, through a queue of its
// own, whose ordering TSan cannot see: the reactor's destruction there would race with the
// callback that ended the call. Under TSan, OnDone runs inline instead, on that very thread,
// as gRPC does for its own inlineable reactors (no lock of the project's is held there: gRPC
// ends calls only from its callbacks, after the reactor's own callback has returned).
void grpc::internal::ServerCallbackCall::ScheduleOnDone(bool /*inline_ondone*/) {
  using ScheduleFn = void (*)(grpc::internal::ServerCallbackCall*, bool);
  static const auto real =
      RealC<ScheduleFn>("_ZN4grpc8internal18ServerCallbackCall14ScheduleOnDoneEb");
  real(this, true);
}
