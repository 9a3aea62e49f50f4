/* veth links and the nftables table of egress boxes (see link.h). */
#define _GNU_SOURCE
#include "egress/link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/limits.h"
#include "util/cleanup.h"

#define LINK_NET 0x0aef0000u /* 10.239.0.0/18: HUSK_UID_SLOTS /30 links */

_Static_assert(HUSK_UID_SLOTS * 4 <= 16384, "egress link range too small for the slot count");

void egress_link_addrs(unsigned slot, uint32_t *host, uint32_t *box) {
  *host = htonl(LINK_NET + slot * 4 + 1);
  *box = htonl(LINK_NET + slot * 4 + 2);
}

void egress_link_ifname(const struct egress_net *n, unsigned slot, char *out, size_t len) {
  snprintf(out, len, "%s%u", n->ifprefix, slot);
}

/* Run a program with `input` on stdin, optionally inside network namespace
 * `netns`; its stderr becomes the error message.  Only async-signal-safe
 * calls between fork and exec (the daemon is multi-threaded). */
static int run(const char *const argv[], const char *input, int netns, struct husk_err *err) {
  int in[2], errp[2];
  if (pipe2(in, O_CLOEXEC) < 0)
    return husk_error(err, errno, "pipe");
  if (pipe2(errp, O_CLOEXEC) < 0) {
    close(in[0]);
    close(in[1]);
    return husk_error(err, errno, "pipe");
  }
  static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
  pid_t pid = fork();
  if (pid < 0) {
    close(in[0]);
    close(in[1]);
    close(errp[0]);
    close(errp[1]);
    return husk_error(err, errno, "fork");
  }
  if (pid == 0) {
    if (netns >= 0 && setns(netns, CLONE_NEWNET) < 0)
      _exit(126);
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (dup2(in[0], 0) < 0 || dup2(devnull >= 0 ? devnull : errp[1], 1) < 0 || dup2(errp[1], 2) < 0)
      _exit(126);
    execve(argv[0], (char *const *)argv, envp);
    _exit(127);
  }
  close(in[0]);
  close(errp[1]);
  if (input) {
    size_t len = strlen(input), off = 0;
    while (off < len) {
      ssize_t w = write(in[1], input + off, len - off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        break;
      off += (size_t)w;
    }
  }
  close(in[1]);
  char msg[512];
  size_t got = 0;
  for (;;) {
    ssize_t r = read(errp[0], msg + got, sizeof msg - 1 - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
    if (got == sizeof msg - 1) {
      char sink[256];
      while (read(errp[0], sink, sizeof sink) > 0)
        ;
      break;
    }
  }
  close(errp[0]);
  msg[got] = '\0';
  for (size_t i = 0; i < got; i++)
    if (msg[i] == '\n')
      msg[i] = ' ';
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return husk_error(err, errno, "waitpid `%s`", argv[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return husk_fail(err, EIO, "`%s` failed (status %d): %s", argv[0],
                     WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), msg);
  return 0;
}

static int nft(const char *script, struct husk_err *err) {
  const char *argv[] = {"/usr/sbin/nft", "-f", "-", NULL};
  return run(argv, script, -1, err);
}

int egress_net_init(struct egress_net *n, const char *hash, struct husk_err *err) {
  snprintf(n->table, sizeof n->table, "husk_%.8s", hash);
  snprintf(n->ifprefix, sizeof n->ifprefix, "hk%.6s-", hash);
  if (access("/usr/sbin/nft", X_OK) < 0)
    return husk_fail(err, ENOTSUP, "network mode egress needs nftables (`/usr/sbin/nft`): apt-get install nftables");
  if (access("/usr/sbin/ip", X_OK) < 0)
    return husk_fail(err, ENOTSUP, "network mode egress needs iproute2 (`/usr/sbin/ip`): apt-get install iproute2");
  char script[2048];
  /* "add table" first so that "delete table" never fails; the whole file
   * is one transaction. */
  snprintf(script, sizeof script,
           "add table inet %1$s\n"
           "delete table inet %1$s\n"
           "table inet %1$s {\n"
           "  set links { type ifname . ipv4_addr . ipv4_addr; }\n"
           "  chain pre {\n"
           "    type nat hook prerouting priority dstnat; policy accept;\n"
           "    iifname \"%2$s*\" tcp dport 80 redirect to :%3$d\n"
           "    iifname \"%2$s*\" tcp dport 443 redirect to :%4$d\n"
           "    iifname \"%2$s*\" udp dport 53 redirect to :%5$d\n"
           "  }\n"
           "  chain in {\n"
           "    type filter hook input priority filter - 5; policy accept;\n"
           "    iifname \"%2$s*\" jump box\n"
           "  }\n"
           "  chain box {\n"
           "    meta nfproto != ipv4 drop\n"
           "    iifname . ip saddr . ip daddr != @links drop\n"
           "    tcp dport { %6$d, %3$d, %4$d } accept\n"
           "    udp dport %5$d accept\n"
           "    drop\n"
           "  }\n"
           "  chain fw {\n"
           "    type filter hook forward priority filter - 5; policy accept;\n"
           "    iifname \"%2$s*\" drop\n"
           "    oifname \"%2$s*\" drop\n"
           "  }\n"
           "}\n",
           n->table, n->ifprefix, EGRESS_PORT_HTTP, EGRESS_PORT_HTTPS, EGRESS_PORT_DNS,
           EGRESS_PORT_PROXY);
  if (nft(script, err) < 0)
    return husk_error_wrap(err, "cannot set up the egress firewall (nftables)");
  return 0;
}

void egress_net_fini(const struct egress_net *n) {
  char script[128];
  snprintf(script, sizeof script, "add table inet %1$s\ndelete table inet %1$s\n", n->table);
  struct husk_err ignored;
  nft(script, &ignored);
}

static int element(const struct egress_net *n, unsigned slot, const char *verb, struct husk_err *err) {
  uint32_t host, box;
  egress_link_addrs(slot, &host, &box);
  char hs[16], bs[16], ifn[IFNAMSIZ + 8], script[256];
  inet_ntop(AF_INET, &host, hs, sizeof hs);
  inet_ntop(AF_INET, &box, bs, sizeof bs);
  egress_link_ifname(n, slot, ifn, sizeof ifn);
  snprintf(script, sizeof script, "%s element inet %s links { \"%s\" . %s . %s }\n", verb, n->table,
           ifn, bs, hs);
  return nft(script, err);
}

int egress_link_allow(const struct egress_net *n, unsigned slot, struct husk_err *err) {
  char ifn[IFNAMSIZ + 8];
  egress_link_ifname(n, slot, ifn, sizeof ifn);
  if (if_nametoindex(ifn) == 0)
    return husk_fail(err, ENODEV, "the box's link `%s` is gone", ifn);
  return element(n, slot, "add", err);
}

int egress_link_up(const struct egress_net *n, unsigned slot, pid_t pid, int pidfd,
                   struct husk_err *err) {
  char path[64], ifn[IFNAMSIZ + 8], hs[16], bs[16], hcidr[24], bcidr[24], pids[16];
  uint32_t host, box;
  egress_link_addrs(slot, &host, &box);
  inet_ntop(AF_INET, &host, hs, sizeof hs);
  inet_ntop(AF_INET, &box, bs, sizeof bs);
  snprintf(hcidr, sizeof hcidr, "%s/30", hs);
  snprintf(bcidr, sizeof bcidr, "%s/30", bs);
  egress_link_ifname(n, slot, ifn, sizeof ifn);
  snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
  snprintf(pids, sizeof pids, "%d", (int)pid);
  cleanup_close int ns = open(path, O_RDONLY | O_CLOEXEC);
  if (ns < 0)
    return husk_error(err, errno, "cannot open the box's network namespace");
  /* The namespace we hold is the box's only if init still runs now. */
  if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
    return husk_error(err, errno, "the box ended during network setup");
  /* A stale host end of the same name (a crash mid-setup) would block us. */
  if (if_nametoindex(ifn) != 0)
    egress_link_down(n, slot);
  {
    const char *argv[] = {"/usr/sbin/ip", "link", "add", ifn, "type", "veth", "peer", "name", "eth0",
                          "netns", pids, NULL};
    if (run(argv, NULL, -1, err) < 0)
      return husk_error_wrap(err, "cannot create the box's network link");
  }
  char host_cmds[256];
  snprintf(host_cmds, sizeof host_cmds, "link set %s addrgenmode none\naddr add %s dev %s\nlink set %s up\n",
           ifn, hcidr, ifn, ifn);
  char box_cmds[256];
  snprintf(box_cmds, sizeof box_cmds,
           /* addrgenmode none: no IPv6 link-local address either */
           "link set eth0 addrgenmode none\naddr add %s dev eth0\nlink set eth0 up\n"
           "route add default via %s dev eth0\n",
           bcidr, hs);
  const char *batch[] = {"/usr/sbin/ip", "-batch", "-", NULL};
  /* No IPv6 on the link at all (no link-local addresses either). */
  char sysctl[96];
  snprintf(sysctl, sizeof sysctl, "/proc/sys/net/ipv6/conf/%s/disable_ipv6", ifn);
  int sfd = open(sysctl, O_WRONLY | O_CLOEXEC);
  if (sfd >= 0) {
    if (write(sfd, "1", 1) < 0) {
      /* no IPv6 on this host: nothing to disable */
    }
    close(sfd);
  }
  if (run(batch, host_cmds, -1, err) < 0 || run(batch, box_cmds, ns, err) < 0 ||
      element(n, slot, "add", err) < 0) {
    husk_error_wrap(err, "cannot configure the box's network link");
    egress_link_down(n, slot);
    return -1;
  }
  return 0;
}

void egress_link_down(const struct egress_net *n, unsigned slot) {
  struct husk_err ignored;
  element(n, slot, "delete", &ignored);
  char ifn[IFNAMSIZ + 8];
  egress_link_ifname(n, slot, ifn, sizeof ifn);
  if (if_nametoindex(ifn) == 0)
    return;
  const char *argv[] = {"/usr/sbin/ip", "link", "del", ifn, NULL};
  run(argv, NULL, -1, &ignored);
}

void egress_link_sweep(const struct egress_net *n, bool (*keep)(void *ctx, unsigned slot), void *ctx) {
  struct if_nameindex *ifs = if_nameindex();
  if (!ifs)
    return;
  size_t pl = strlen(n->ifprefix);
  for (struct if_nameindex *i = ifs; i->if_index; i++) {
    if (strncmp(i->if_name, n->ifprefix, pl))
      continue;
    char *end;
    unsigned long slot = strtoul(i->if_name + pl, &end, 10);
    if (*end || slot >= HUSK_UID_SLOTS || keep(ctx, (unsigned)slot))
      continue;
    egress_link_down(n, (unsigned)slot);
  }
  if_freenameindex(ifs);
}
