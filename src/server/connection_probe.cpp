#include "server/connection_probe.h"

#include <arpa/inet.h>
#include <cerrno>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <cstdlib>

namespace rlt::server {
namespace {

bool address_of(const sockaddr_storage& ss, std::string* addr, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    if (inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf) == nullptr) return false;
    *port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf) == nullptr) return false;
    *port = ntohs(a->sin6_port);
  } else {
    return false;
  }
  *addr = buf;
  return true;
}

// The local port and peer of a connected TCP socket; false for anything else.
bool connection_of(int fd, int* local_port, std::string* peer_addr, int* peer_port) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage local{}, peer{};
  socklen_t len = sizeof local;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return false;
  len = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;
  std::string la;
  return address_of(local, &la, local_port) && address_of(peer, peer_addr, peer_port);
}

bool matches(int fd, int local_port, const std::string& remote_addr, int remote_port) {
  int lp = 0, pp = 0;
  std::string pa;
  return connection_of(fd, &lp, &pa, &pp) && lp == local_port && pp == remote_port && pa == remote_addr;
}

// Calls fn(fd) for every open descriptor of this process.
template <typename Fn>
void for_each_fd(Fn fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (!fn(static_cast<int>(fd))) break;
  }
  closedir(dir);
}

}  // namespace

ConnectionProbe ConnectionProbe::find(int local_port, const std::string& remote_addr, int remote_port) {
  ConnectionProbe probe;
  for_each_fd([&](int fd) {
    if (!matches(fd, local_port, remote_addr, remote_port)) return true;
    probe.fd_ = fd;
    return false;
  });
  return probe;
}

void ConnectionProbe::limit_writes(double timeout_s, int send_buffer_bytes) const {
  if (fd_ < 0) return;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((timeout_s - static_cast<double>(tv.tv_sec)) * 1e6);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &send_buffer_bytes, sizeof send_buffer_bytes);
}

int ConnectionProbe::shutdown_all(int local_port) {
  int n = 0;
  for_each_fd([&](int fd) {
    int lp = 0, pp = 0;
    std::string pa;
    if (connection_of(fd, &lp, &pa, &pp) && lp == local_port && shutdown(fd, SHUT_RDWR) == 0) ++n;
    return true;
  });
  return n;
}

bool ConnectionProbe::peer_closed() const {
  if (fd_ < 0) return false;
  char byte = 0;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;  // orderly shutdown by the peer
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  return false;
}

}  // namespace rlt::server
