// HttpGet: a minimal blocking HTTP/1.1 GET against 127.0.0.1, for tests of the /metrics servers.
//
//   EXPECT_THAT(testing::HttpGet(port, "/metrics"), HasSubstr("gravac_steps_total"));
//
// Thread-safety: stateless.
#ifndef GRAVAC_CORE_TESTING_HTTP_GET_H_
#define GRAVAC_CORE_TESTING_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace gravac::testing {

// GET http://127.0.0.1:port/path; the whole response (status line, headers, body), "" when the
// connection fails.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return response;
}

}  // namespace gravac::testing

#endif  // GRAVAC_CORE_TESTING_HTTP_GET_H_
