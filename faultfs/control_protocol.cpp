#include "faultfs/control_protocol.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace ckpt::faultfs {

namespace {

constexpr size_t kMaxCommandBytes = 8192;

// A unix socket's address holds at most 107 bytes of path (sun_path), and a drill's work dir under a
// bench's or a CI job's scratch dir is deeper than that (.../faults/power-loss-mid-save/faultfs-state/
// control.sock: 116 bytes under `make bench`, issue 67's "flake"). A longer path is reached through
// its directory opened O_PATH: "/proc/self/fd/N/control.sock" names the same file, and the kernel
// resolves it as any path, for bind and connect alike. The directory stays open until the call is done.
class SocketAddress {
 public:
  Status set(const std::string& path) {
    std::memset(&addr_, 0, sizeof(addr_));
    addr_.sun_family = AF_UNIX;
    std::string name = path;
    if (path.size() >= sizeof(addr_.sun_path)) {
      const size_t slash = path.rfind('/');
      const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
      dir_fd_ = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (dir_fd_ < 0)
        return Status::io_error("faultfs control socket " + path +
                                ": cannot open its directory: " + std::strerror(errno));
      name = "/proc/self/fd/" + std::to_string(dir_fd_) + "/" + path.substr(slash + 1);
    }
    if (name.size() >= sizeof(addr_.sun_path))
      return Status::invalid_argument("faultfs control socket name " + path.substr(path.rfind('/') + 1) +
                                      " is too long for a unix socket address");
    std::memcpy(addr_.sun_path, name.c_str(), name.size());
    return Status::ok();
  }
  ~SocketAddress() {
    if (dir_fd_ >= 0) ::close(dir_fd_);
  }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&addr_); }
  socklen_t size() const { return sizeof(addr_); }

 private:
  sockaddr_un addr_{};
  int dir_fd_ = -1;
};

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads up to the first newline (not included), giving up after `timeout_ms` or `max_bytes`.
bool read_line(int fd, int timeout_ms, size_t max_bytes, std::string* line) {
  line->clear();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  while (true) {
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
            .count());
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, left);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return false;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    line->append(buf, static_cast<size_t>(n));
    size_t nl = line->find('\n');
    if (nl != std::string::npos) {
      line->resize(nl);
      return true;
    }
    if (line->size() > max_bytes) return false;
  }
}

std::string errno_reply(const char* what, Errno e) {
  return std::string("error ") + what + ": " + std::strerror(e);
}

}  // namespace

std::string execute_control_command(DurabilityModel& model, const std::string& line, KillGate* gate) {
  size_t space = line.find(' ');
  std::string command = line.substr(0, space);
  std::string argument = space == std::string::npos ? "" : line.substr(space + 1);
  if (command == "ping") return "ok";
  if (command == "power-loss") {
    auto losses = model.power_loss();
    if (!losses.is_ok()) return "error " + losses.status().to_string();
    return "ok " + losses_json(*losses);
  }
  if (command == "recover") {
    model.recover();
    return "ok";
  }
  if (command == "sync") {
    Errno e = model.sync();
    return e ? errno_reply("sync", e) : "ok";
  }
  if (command == "enospc-after") {
    char* end = nullptr;
    errno = 0;
    unsigned long long bytes = std::strtoull(argument.c_str(), &end, 10);
    if (argument.empty() || *end != '\0' || errno != 0 || argument[0] == '-')
      return "error enospc-after takes a byte count, got `" + argument + "`";
    model.enospc_after(bytes);
    return "ok";
  }
  if (command == "eio-read") {
    if (argument.empty()) return "error eio-read takes a path relative to the mount";
    model.eio_on_read(argument);
    return "ok";
  }
  if (command == "clear") {
    model.clear_faults();
    return "ok";
  }
  if (command == "journal") return "ok " + model.journal_json();
  if (gate && command == "gate") {
    const Status armed = gate->arm(argument);
    return armed.is_ok() ? "ok" : "error " + armed.message();
  }
  if (gate && command == "gate-wait") {
    const int ms = std::atoi(argument.c_str());
    if (ms < 0 || ms > 60000) return "error gate-wait takes milliseconds, 0 to 60000, got `" + argument + "`";
    auto held = gate->wait_held(ms);
    return held ? "ok held " + *held : "ok waiting";
  }
  if (gate && command == "gate-release") {
    gate->release();
    return "ok";
  }
  return "error unknown command `" + command +
         "` (expected ping, power-loss, recover, sync, enospc-after, eio-read, clear, journal" +
         std::string(gate ? ", gate, gate-wait, gate-release)" : ")");
}

Result<std::string> send_control_command(const std::string& socket_path, const std::string& line,
                                         int timeout_ms) {
  SocketAddress addr;
  CKPT_RETURN_IF_ERROR(addr.set(socket_path));
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::io_error(std::string("faultfs control: socket: ") + std::strerror(errno));
  if (::connect(fd, addr.get(), addr.size()) != 0) {
    Status s = Status::io_error("faultfs control: connect " + socket_path + ": " + std::strerror(errno) +
                                " (is ckptcheck-faultfs running?)");
    ::close(fd);
    return s;
  }
  std::string reply;
  bool ok = write_all(fd, line + "\n") && read_line(fd, timeout_ms, SIZE_MAX / 2, &reply);
  ::close(fd);
  if (!ok) return Status::io_error("faultfs control: no reply to `" + line + "` from " + socket_path);
  if (reply == "ok") return std::string();
  if (reply.rfind("ok ", 0) == 0) return reply.substr(3);
  if (reply.rfind("error ", 0) == 0)
    return Status::invalid_argument("faultfs control `" + line + "`: " + reply.substr(6));
  return Status::io_error("faultfs control: unexpected reply to `" + line + "`: " + reply.substr(0, 200));
}

Result<std::unique_ptr<ControlServer>> ControlServer::listen(const std::string& socket_path,
                                                             DurabilityModel& model, KillGate* gate) {
  SocketAddress addr;
  CKPT_RETURN_IF_ERROR(addr.set(socket_path));
  ::unlink(socket_path.c_str());  // a socket file left by a daemon that was killed
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::io_error(std::string("faultfs control: socket: ") + std::strerror(errno));
  if (::bind(fd, addr.get(), addr.size()) != 0 || ::listen(fd, 8) != 0) {
    Status s = Status::io_error("faultfs control: listen on " + socket_path + ": " + std::strerror(errno));
    ::close(fd);
    return s;
  }
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    ::close(fd);
    return Status::io_error(std::string("faultfs control: pipe: ") + std::strerror(errno));
  }
  return std::unique_ptr<ControlServer>(new ControlServer(socket_path, fd, wake[0], wake[1], model, gate));
}

ControlServer::ControlServer(std::string path, int listen_fd, int wake_read, int wake_write,
                             DurabilityModel& model, KillGate* gate)
    : path_(std::move(path)),
      listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      model_(model),
      gate_(gate) {
  thread_ = std::thread([this] { serve(); });
}

ControlServer::~ControlServer() {
  char byte = 1;
  (void)!::write(wake_write_, &byte, 1);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_read_);
  ::close(wake_write_);
  ::unlink(path_.c_str());
}

void ControlServer::serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    int rc = ::poll(fds, 2, -1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 || (fds[1].revents & POLLIN)) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    std::string line;
    if (read_line(client, 10000, kMaxCommandBytes, &line))
      write_all(client, execute_control_command(model_, line, gate_) + "\n");
    ::close(client);
  }
}

}  // namespace ckpt::faultfs
