// Whether the client of an HTTP request is still connected, while its answer is being made:
// cpp-httplib only notices a closed connection when a write fails, and a request may wait
// long before its first token (or, unstreamed, until its last).
#pragma once

#include <string>

namespace nuvec::lm::serve {

/// A look at one accepted TCP connection of this process.
class PeerWatch {
 public:
  /// The connection whose local end is local_port and whose peer is remote_addr:remote_port
  /// (as httplib's Request gives them), found among the process's open sockets
  /// (/proc/self/fd). A connection that is not found is taken as always open.
  static PeerWatch find(int local_port, const std::string& remote_addr, int remote_port);

  /// Whether the peer has closed or reset the connection (a non-blocking peek reads end of
  /// stream or an error). Data waiting (a pipelined request) counts as open.
  bool closed() const;

 private:
  int fd_ = -1;
};

} // namespace nuvec::lm::serve
