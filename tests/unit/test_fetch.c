/* The sign-in fetcher (src/auth/fetch.c) against a loopback HTTP server
 * in a thread: what it answers, what it refuses, and its bounds. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth/fetch.h"
#include "unit.h"

/* The server: one reply per connection, chosen by the request's path. */
static int srv_fd = -1;
static unsigned srv_port;
static atomic_int srv_requests, srv_connections;
static atomic_int srv_hold; /* while set, /slow does not answer */
static char srv_last_auth[256];
static char srv_last_body[256];

static void send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0)
      return;
    p += w;
    n -= (size_t)w;
  }
}

static void *srv_conn(void *arg) {
  int fd = (int)(intptr_t)arg;
  char req[8192];
  size_t n = 0;
  atomic_fetch_add(&srv_connections, 1);
  for (;;) {
    ssize_t r = recv(fd, req + n, sizeof req - 1 - n, 0);
    if (r <= 0)
      goto done;
    n += (size_t)r;
    req[n] = 0;
    if ((unsigned char)req[0] == 0x16)
      goto done; /* a TLS handshake: this server speaks plain HTTP only */
    char *end = strstr(req, "\r\n\r\n");
    if (!end)
      continue;
    char *cl = strcasestr(req, "Content-Length:");
    size_t want = cl && cl < end ? (size_t)atol(cl + 15) : 0;
    if (n >= (size_t)(end + 4 - req) + want)
      break;
  }
  atomic_fetch_add(&srv_requests, 1);
  char *a = strcasestr(req, "Authorization: ");
  if (a) {
    size_t k = strcspn(a, "\r");
    snprintf(srv_last_auth, sizeof srv_last_auth, "%.*s", (int)k, a);
  }
  char *b = strstr(req, "\r\n\r\n");
  snprintf(srv_last_body, sizeof srv_last_body, "%s", b ? b + 4 : "");
  char reply[1024];
  if (!strncmp(req, "GET /json ", 10) || !strncmp(req, "POST /json ", 11)) {
    const char *body = "{\"ok\":true}";
    snprintf(reply, sizeof reply,
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: public, "
             "max-age=600\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             strlen(body), body);
    send_all(fd, reply, strlen(reply));
  } else if (!strncmp(req, "GET /big ", 9)) {
    snprintf(reply, sizeof reply,
             "HTTP/1.1 200 OK\r\nContent-Length: 200000\r\nConnection: close\r\n\r\n");
    send_all(fd, reply, strlen(reply));
    static char junk[200000];
    memset(junk, 'a', sizeof junk);
    send_all(fd, junk, sizeof junk);
  } else if (!strncmp(req, "GET /chunked ", 13)) {
    /* No length announced: the bound is the write callback's. */
    snprintf(reply, sizeof reply, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
    send_all(fd, reply, strlen(reply));
    static char junk[100000];
    memset(junk, 'b', sizeof junk);
    send_all(fd, junk, sizeof junk);
  } else if (!strncmp(req, "GET /redirect ", 14)) {
    snprintf(reply, sizeof reply,
             "HTTP/1.1 302 Found\r\nLocation: /json\r\nContent-Length: 5\r\nConnection: "
             "close\r\n\r\nmoved");
    send_all(fd, reply, strlen(reply));
  } else if (!strncmp(req, "GET /nostore ", 13)) {
    snprintf(reply, sizeof reply,
             "HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: 2\r\nConnection: "
             "close\r\n\r\n{}");
    send_all(fd, reply, strlen(reply));
  } else if (!strncmp(req, "GET /slow ", 10)) {
    while (atomic_load(&srv_hold))
      usleep(10000);
    snprintf(reply, sizeof reply,
             "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
    send_all(fd, reply, strlen(reply));
  } else {
    snprintf(reply, sizeof reply,
             "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    send_all(fd, reply, strlen(reply));
  }
done:
  close(fd);
  return NULL;
}

static void *srv_main(void *arg) {
  (void)arg;
  for (;;) {
    int c = accept(srv_fd, NULL, NULL);
    if (c < 0)
      return NULL;
    pthread_t t;
    if (pthread_create(&t, NULL, srv_conn, (void *)(intptr_t)c) != 0) {
      close(c);
      continue;
    }
    pthread_detach(t);
  }
}

static void srv_start(void) {
  srv_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof a;
  if (srv_fd < 0 || bind(srv_fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(srv_fd, 64) < 0 ||
      getsockname(srv_fd, (struct sockaddr *)&a, &l) < 0) {
    perror("server");
    exit(2);
  }
  srv_port = ntohs(a.sin_port);
  pthread_t t;
  if (pthread_create(&t, NULL, srv_main, NULL) != 0)
    exit(2);
  pthread_detach(t);
}

static char *url(const char *scheme, const char *path) {
  static char buf[4][128];
  static int k;
  char *u = buf[k++ % 4];
  snprintf(u, sizeof buf[0], "%s://127.0.0.1:%u%s", scheme, srv_port, path);
  return u;
}

static struct auth_fetcher *open_fetcher(const char *const *ranges, size_t n, unsigned conc) {
  struct auth_fetcher *f = NULL;
  struct husk_err err;
  struct auth_fetch_config cfg = {.allow_ranges = ranges, .n_allow_ranges = n, .concurrency = conc};
  if (auth_fetcher_open(&f, &cfg, &err) < 0) {
    printf("# open: %s\n", err.msg);
    exit(2);
  }
  return f;
}

TEST(loopback_get) {
  struct auth_fetcher *f = open_fetcher(NULL, 0, 0);
  struct auth_fetch_reply r;
  struct husk_err err;
  struct auth_fetch_request rq = {.url = url("http", "/json"), .loopback_ok = true};
  CHECK(auth_fetch(f, &rq, &r, &err) == 0);
  CHECK(r.status == 200);
  CHECK_STR(r.body, "{\"ok\":true}");
  CHECK(r.len == 11);
  CHECK(r.max_age_s == 600);
  auth_fetch_reply_free(&r);
  rq.url = url("http", "/nostore");
  CHECK(auth_fetch(f, &rq, &r, &err) == 0);
  CHECK(r.status == 200 && r.max_age_s == 0);
  auth_fetch_reply_free(&r);
  rq.url = url("http", "/missing");
  CHECK(auth_fetch(f, &rq, &r, &err) == 0);
  CHECK(r.status == 404 && r.len == 0 && r.body && r.max_age_s == -1);
  auth_fetch_reply_free(&r);
  auth_fetcher_close(f);
}

TEST(post_basic) {
  struct auth_fetcher *f = open_fetcher(NULL, 0, 0);
  struct auth_fetch_reply r;
  struct husk_err err;
  struct auth_fetch_request rq = {.url = url("http", "/json"),
                                  .loopback_ok = true,
                                  .form_body = "grant_type=authorization_code&code=abc",
                                  .basic_user = "client",
                                  .basic_pass = "s%3Acret"};
  CHECK(auth_fetch(f, &rq, &r, &err) == 0);
  CHECK(r.status == 200);
  CHECK_STR(srv_last_body, "grant_type=authorization_code&code=abc");
  /* base64("client:s%3Acret") */
  CHECK_STR(srv_last_auth, "Authorization: Basic Y2xpZW50OnMlM0FjcmV0");
  auth_fetch_reply_free(&r);
  auth_fetcher_close(f);
}

TEST(size_bound) {
  struct auth_fetcher *f = open_fetcher(NULL, 0, 0);
  struct auth_fetch_reply r;
  struct husk_err err;
  struct auth_fetch_request rq = {.url = url("http", "/big"), .loopback_ok = true};
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EFBIG);
  CHECK(r.body == NULL);
  rq.url = url("http", "/chunked");
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EFBIG);
  rq.max_bytes = 200000;
  CHECK(auth_fetch(f, &rq, &r, &err) == 0 && r.len == 100000);
  auth_fetch_reply_free(&r);
  auth_fetcher_close(f);
}

TEST(redirect_not_followed) {
  struct auth_fetcher *f = open_fetcher(NULL, 0, 0);
  struct auth_fetch_reply r;
  struct husk_err err;
  int before = atomic_load(&srv_requests);
  struct auth_fetch_request rq = {.url = url("http", "/redirect"), .loopback_ok = true};
  CHECK(auth_fetch(f, &rq, &r, &err) == 0);
  CHECK(r.status == 302);
  CHECK(r.len == 0 && r.body && r.body[0] == 0);
  CHECK(atomic_load(&srv_requests) == before + 1);
  auth_fetch_reply_free(&r);
  auth_fetcher_close(f);
}

TEST(refusals) {
  struct auth_fetcher *f = open_fetcher(NULL, 0, 0);
  struct auth_fetch_reply r;
  struct husk_err err;
  /* http without loopback_ok, other schemes, credentials in the URL */
  struct auth_fetch_request rq = {.url = url("http", "/json")};
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EINVAL);
  rq.url = "ftp://127.0.0.1/x";
  rq.loopback_ok = true;
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EINVAL);
  rq.url = "file:///etc/passwd";
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EINVAL);
  rq.url = "https://user:pw@127.0.0.1/";
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EINVAL);
  CHECK(!strstr(err.msg, "pw"));
  /* loopback refused without loopback_ok: the connection is never made */
  int before = atomic_load(&srv_connections);
  rq.url = url("https", "/json");
  rq.loopback_ok = false;
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EACCES);
  CHECK(strstr(err.msg, "127.0.0.1") != NULL);
  /* a name that resolves to loopback is refused the same way */
  char u[128];
  snprintf(u, sizeof u, "https://localhost:%u/json", srv_port);
  rq.url = u;
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EACCES);
  usleep(50000);
  CHECK(atomic_load(&srv_connections) == before);
  /* loopback_ok opens loopback only, not the other denied ranges */
  rq.url = "http://10.255.255.1:9/";
  rq.loopback_ok = true;
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EACCES);
  rq.url = "http://169.254.169.254/latest/meta-data/";
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EACCES);
  auth_fetcher_close(f);
}

TEST(allowed_range) {
  const char *ranges[] = {"127.0.0.0/8"};
  struct auth_fetcher *f = open_fetcher(ranges, 1, 0);
  struct auth_fetch_reply r;
  struct husk_err err;
  /* https to the plain server: allowed to connect, then TLS fails */
  int before = atomic_load(&srv_connections);
  struct auth_fetch_request rq = {.url = url("https", "/json"), .timeout_ms = 2000};
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EPROTO);
  CHECK(atomic_load(&srv_connections) > before);
  auth_fetcher_close(f);
  /* a range that does not hold the address leaves it denied */
  const char *other[] = {"192.0.2.0/24"};
  f = open_fetcher(other, 1, 0);
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EACCES);
  auth_fetcher_close(f);
  /* a bad range is refused at the start */
  const char *bad[] = {"127.0.0.0/99"};
  struct auth_fetch_config cfg = {.allow_ranges = bad, .n_allow_ranges = 1};
  CHECK(auth_fetcher_open(&f, &cfg, &err) < 0 && err.code == EINVAL);
  struct auth_fetch_config cfg2 = {.ca_file = "/nonexistent/ca.pem"};
  CHECK(auth_fetcher_open(&f, &cfg2, &err) < 0 && err.code == EINVAL);
}

struct bg {
  struct auth_fetcher *f;
  int rc;
};
static void *bg_fetch(void *arg) {
  struct bg *b = arg;
  struct auth_fetch_reply r;
  struct husk_err err;
  struct auth_fetch_request rq = {.url = url("http", "/slow"), .loopback_ok = true};
  b->rc = auth_fetch(b->f, &rq, &r, &err);
  if (b->rc == 0)
    auth_fetch_reply_free(&r);
  return NULL;
}

TEST(busy) {
  struct auth_fetcher *f = open_fetcher(NULL, 0, 1);
  atomic_store(&srv_hold, 1);
  int before = atomic_load(&srv_connections);
  struct bg b = {.f = f, .rc = -2};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, bg_fetch, &b) == 0);
  for (int i = 0; i < 500 && atomic_load(&srv_connections) == before; i++)
    usleep(10000);
  struct auth_fetch_reply r;
  struct husk_err err;
  struct auth_fetch_request rq = {.url = url("http", "/json"), .loopback_ok = true};
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == EBUSY);
  atomic_store(&srv_hold, 0);
  pthread_join(t, NULL);
  CHECK(b.rc == 0);
  /* the slot is given back */
  CHECK(auth_fetch(f, &rq, &r, &err) == 0);
  auth_fetch_reply_free(&r);
  auth_fetcher_close(f);
}

TEST(timeout) {
  struct auth_fetcher *f = open_fetcher(NULL, 0, 0);
  atomic_store(&srv_hold, 1);
  struct auth_fetch_reply r;
  struct husk_err err;
  struct auth_fetch_request rq = {
      .url = url("http", "/slow"), .loopback_ok = true, .timeout_ms = 300};
  CHECK(auth_fetch(f, &rq, &r, &err) < 0 && err.code == ETIMEDOUT);
  atomic_store(&srv_hold, 0);
  auth_fetcher_close(f);
}

int main(void) {
  srv_start();
  RUN(loopback_get);
  RUN(post_basic);
  RUN(size_bound);
  RUN(redirect_not_followed);
  RUN(refusals);
  RUN(allowed_range);
  RUN(busy);
  RUN(timeout);
  return unit_done();
}
