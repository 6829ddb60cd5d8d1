// Closed-connection checks (src/lm/serve/peer_watch.h).
#include "lm/serve/peer_watch.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

namespace nuvec::lm::serve {

namespace {

// The numeric host and port of a socket address (as httplib's get_remote_ip_and_port).
bool host_port(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char h[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, h, sizeof h, nullptr, 0, NI_NUMERICHOST) != 0) {
    return false;
  }
  host = h;
  if (addr.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  } else if (addr.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  } else {
    return false;
  }
  return true;
}

} // namespace

PeerWatch PeerWatch::find(int local_port, const std::string& remote_addr, int remote_port) {
  PeerWatch w;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    int fd = -1;
    try {
      fd = std::stoi(it->path().filename().string());
    } catch (...) {
      continue;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
      continue;
    }
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
      continue;
    }
    std::string lhost, phost;
    int lport = -1, pport = -1;
    if (host_port(local, local_len, lhost, lport) && host_port(peer, peer_len, phost, pport) &&
        lport == local_port && pport == remote_port && phost == remote_addr) {
      w.fd_ = fd;
      break;
    }
  }
  return w;
}

bool PeerWatch::closed() const {
  if (fd_ < 0) {
    return false;
  }
  char c;
  ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) {
    return false;
  }
  if (n == 0) {
    return true;
  }
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

} // namespace nuvec::lm::serve
