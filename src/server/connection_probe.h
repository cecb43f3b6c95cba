// The socket of the connection a handler serves. httplib 0.11 gives handlers no access to it, no
// "connection closed" query and only a select() before each blocking send(), so the probe finds
// the socket by its address pair (local port, peer address and port: unique among open
// connections) to notice clients that went away while their request waits for tokens, and to
// bound what a client that stops reading can cost. While the handler runs, httplib keeps that
// socket open, so the descriptor stays ours. Linux-specific (/proc/self/fd); without it the probe
// does nothing and vanished clients are noticed at the next write instead.
#pragma once

#include <string>

namespace rlt::server {

class ConnectionProbe {
 public:
  ConnectionProbe() = default;
  static ConnectionProbe find(int local_port, const std::string& remote_addr, int remote_port);

  // True once the peer closed its side or the connection broke (pipelined bytes are left unread).
  bool peer_closed() const;
  bool valid() const { return fd_ >= 0; }
  // Makes a send() that cannot progress fail after `timeout_s` (httplib's own write timeout only
  // guards the select() before it; a large write to a client that stopped reading would block
  // forever) and caps the kernel's send buffer, so a stalled reader holds little memory and is
  // noticed after a bounded amount of output.
  void limit_writes(double timeout_s, int send_buffer_bytes) const;

  // Shuts down every connected socket whose local port is `local_port`. For the end of a
  // shutdown: httplib 0.11 lets idle keep-alive connections linger for the whole keep-alive
  // timeout even after stop(); this ends them at once. Returns how many were shut down.
  static int shutdown_all(int local_port);

 private:
  int fd_ = -1;
};

}  // namespace rlt::server
