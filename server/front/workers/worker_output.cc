#include "server/front/workers/worker_output.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "core/host/placement.h"
#include "kprof/v1/kprof.pb.h"
#include "server/ipc/wire.h"

namespace kprof::server {
namespace {

constexpr size_t kPipeBytes = 1 << 20;     // a worker prints this much before the reader must
constexpr size_t kReadBudget = 256 << 10;  // read at most this much of one pipe per wake-up
constexpr size_t kLongestLine = 4 << 10;   // a longer line goes into the log in pieces

// The length of the UTF-8 sequence at `text[i]` (2 to 4), or 0 when none begins there.
size_t Utf8Length(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  const size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return 0;
  }
  const auto second = static_cast<unsigned char>(text[i + 1]);
  if ((c == 0xe0 && second < 0xa0) || (c == 0xed && second >= 0xa0) ||
      (c == 0xf0 && second < 0x90) || (c == 0xf4 && second >= 0x90)) {
    return 0;  // overlong, a surrogate, or past U+10FFFF
  }
  return n;
}

}  // namespace

std::string EscapeOutput(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
        absl::StrAppendFormat(&out, "\\x%02x", c);
      } else {
        out.push_back(static_cast<char>(c));
      }
      ++i;
      continue;
    }
    const size_t n = Utf8Length(text, i);
    if (n == 0) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
      ++i;
    } else if (c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(text[i + 1]));  // C1
      i += 2;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string OutputEnding(const WorkerOutput::Taken& taken) {
  constexpr size_t kShown = 300;
  std::string_view tail = taken.tail;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.remove_suffix(1);
  if (tail.empty()) return "";
  size_t from = tail.size() > kShown ? tail.size() - kShown : 0;
  // Its last three lines, whole where they fit.
  size_t lines = 0;
  for (size_t i = tail.size(); i > from; --i) {
    if (tail[i - 1] == '\n' && ++lines == 3) {
      from = i;
      break;
    }
  }
  std::string ending(tail.substr(from));
  for (char& c : ending) {
    if (c == '\n') c = '|';
  }
  return absl::StrCat("; its output ended: \"", from > 0 ? "..." : "", ending, "\"");
}

void AttachOutput(const WorkerOutput::Taken& taken, kprof::worker::v1::WorkerAnswer* answer) {
  if (taken.bytes == 0) return;
  if (answer->code() != 0) answer->set_message(answer->message() + OutputEnding(taken));
  kprof::v1::JobOutput output;
  output.set_tail(taken.tail);
  output.set_bytes(static_cast<int64_t>(taken.bytes));
  if (answer->has_time_evaluate()) {
    AppendField(kprof::v1::TimeEvaluateResponse::kOutputFieldNumber, output,
                answer->mutable_time_evaluate());
  } else if (answer->has_profile_function()) {
    AppendField(kprof::v1::ProfileFunctionResponse::kOutputFieldNumber, output,
                answer->mutable_profile_function());
  } else if (answer->has_profile()) {
    AppendField(kprof::v1::ProfileResponse::kOutputFieldNumber, output, answer->mutable_profile());
  }
}

absl::StatusOr<std::unique_ptr<WorkerOutput>> WorkerOutput::Start(
    uint64_t log_bytes, const std::vector<int>& measuring_cpus) {
  const int epoll = epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) return absl::InternalError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wake;
  if (wake < 0 || epoll_ctl(epoll, EPOLL_CTL_ADD, wake, &event) != 0) {
    const int error = errno;
    close(epoll);
    if (wake >= 0) close(wake);
    return absl::InternalError(absl::StrCat("the workers' output reader: ", std::strerror(error)));
  }
  std::unique_ptr<WorkerOutput> output(new WorkerOutput(epoll, wake, log_bytes));
  output->thread_ =
      std::thread([reader = output.get(), measuring_cpus] { reader->Loop(measuring_cpus); });
  return output;
}

WorkerOutput::~WorkerOutput() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!write(wake_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  for (const auto& [fd, stream] : streams_) close(fd);
  close(wake_);
  close(epoll_);
}

absl::StatusOr<std::pair<int, int>> WorkerOutput::Open(std::string label) {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2 for a worker's output: ", std::strerror(errno)));
  }
  fcntl(ends[0], F_SETFL, O_NONBLOCK);
  (void)fcntl(ends[0], F_SETPIPE_SZ, static_cast<int>(kPipeBytes));  // the system's limit if less
  absl::MutexLock lock(&mutex_);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = ends[0];
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, ends[0], &event) != 0) {
    const int error = errno;
    close(ends[0]);
    close(ends[1]);
    return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(error)));
  }
  streams_[ends[0]].label = std::move(label);
  return std::make_pair(ends[0], ends[1]);
}

WorkerOutput::Taken WorkerOutput::Take(int key) {
  std::vector<std::string> lines;
  Taken taken;
  {
    absl::MutexLock lock(&mutex_);
    const auto found = streams_.find(key);
    if (found == streams_.end()) return {};
    Stream& stream = found->second;
    if (!stream.ended) stream.ended = Drain(key, stream, SIZE_MAX, lines);
    if (!stream.partial.empty() && stream.logged < log_bytes_) {
      lines.push_back(absl::StrCat(stream.label, ": ", EscapeOutput(stream.partial)));
    }
    stream.partial.clear();
    const size_t from = stream.kept.size() > kKeptBytes ? stream.kept.size() - kKeptBytes : 0;
    taken = {EscapeOutput(std::string_view(stream.kept).substr(from)), stream.bytes};
    stream.kept.clear();
    stream.bytes = 0;
    stream.logged = 0;
  }
  for (const std::string& line : lines) base::Log(base::LogSeverity::kInfo, line);
  return taken;
}

void WorkerOutput::Label(int key, std::string label) {
  absl::MutexLock lock(&mutex_);
  if (const auto found = streams_.find(key); found != streams_.end()) {
    found->second.label = std::move(label);
  }
}

void WorkerOutput::Close(int key) {
  absl::MutexLock lock(&mutex_);
  if (streams_.erase(key) == 0) return;
  epoll_ctl(epoll_, EPOLL_CTL_DEL, key, nullptr);
  close(key);
}

void WorkerOutput::Loop(const std::vector<int>& measuring_cpus) {
  // Not at a low priority: Take waits for the lock this thread holds while it reads.
  core::StandAside(measuring_cpus, /*lowest=*/false);
  epoll_event events[16];
  std::vector<std::string> lines;
  while (true) {
    const int ready = epoll_wait(epoll_, events, 16, -1);
    if (ready < 0 && errno != EINTR) return;
    {
      absl::MutexLock lock(&mutex_);
      if (stopping_) return;
      for (int i = 0; i < ready; ++i) {
        const int fd = events[i].data.fd;
        const auto found = streams_.find(fd);
        if (fd == wake_ || found == streams_.end() || found->second.ended) continue;
        if (Drain(fd, found->second, kReadBudget, lines)) {
          found->second.ended = true;  // kept until Close: the last answer, or a death, takes it
          epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
        }
      }
    }
    for (const std::string& line : lines) base::Log(base::LogSeverity::kInfo, line);
    lines.clear();
  }
}

bool WorkerOutput::Drain(int key, Stream& stream, size_t budget, std::vector<std::string>& lines) {
  char buffer[64 << 10];
  for (size_t read_so_far = 0; read_so_far < budget;) {
    const ssize_t n = read(key, buffer, std::min(sizeof buffer, budget - read_so_far));
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EINTR;
    Keep(stream, buffer, static_cast<size_t>(n), lines);
    read_so_far += static_cast<size_t>(n);
  }
  return false;
}

void WorkerOutput::Keep(Stream& stream, const char* data, size_t size,
                        std::vector<std::string>& lines) {
  stream.bytes += size;
  stream.kept.append(data, size);
  if (stream.kept.size() > 2 * kKeptBytes) stream.kept.erase(0, stream.kept.size() - kKeptBytes);
  if (stream.logged >= log_bytes_) return;
  stream.partial.append(data, std::min<size_t>(size, log_bytes_ - stream.logged + kLongestLine));
  size_t begin = 0;
  for (size_t end; stream.logged < log_bytes_ &&
                   ((end = stream.partial.find('\n', begin)) != std::string::npos ||
                    stream.partial.size() - begin >= kLongestLine);) {
    if (end == std::string::npos) end = begin + kLongestLine;
    const std::string_view line = std::string_view(stream.partial).substr(begin, end - begin);
    lines.push_back(absl::StrCat(stream.label, ": ", EscapeOutput(line)));
    stream.logged += line.size() + 1;
    begin = std::min(end + 1, stream.partial.size());
    if (stream.logged >= log_bytes_) {
      lines.push_back(absl::StrCat(stream.label, ": (", log_bytes_,
                                   " bytes logged; the rest until its next answer is not)"));
    }
  }
  stream.partial.erase(0, begin);
  if (stream.logged >= log_bytes_) stream.partial.clear();
}

}  // namespace kprof::server
