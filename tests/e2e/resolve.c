/* Name lookups from a pod, for the node action's DNS checks (tests/e2e/node.sh): every argument
 * is looked up as the pod's resolver does it, with res_search and the pod's /etc/resolv.conf
 * (nameserver, search list, ndots), and printed with its answers on one line. A name gets its A
 * records ("NAME 10.96.0.1"), an IPv4 address its PTR records ("10.96.0.1 kubernetes...").
 * Exits 1 when any lookup has no answer ("NAME -", the resolver's error on stderr). */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  unsigned char answer[4096], *a;
  char query[NS_MAXDNAME], text[NS_MAXDNAME];
  struct in_addr address;
  int status = 0, i, j, len, found, type;
  ns_msg msg;
  ns_rr rr;

  if (res_init() != 0) {
    fprintf(stderr, "res_init failed\n");
    return 2;
  }
  for (i = 1; i < argc; i++) {
    type = ns_t_a;
    snprintf(query, sizeof query, "%s", argv[i]);
    if (inet_pton(AF_INET, argv[i], &address) == 1) {
      a = (unsigned char *)&address;
      snprintf(query, sizeof query, "%u.%u.%u.%u.in-addr.arpa.", a[3], a[2], a[1], a[0]);
      type = ns_t_ptr;
    }
    found = 0;
    printf("%s", argv[i]);
    len = res_search(query, ns_c_in, type, answer, sizeof answer);
    if (len >= 0 && ns_initparse(answer, len, &msg) == 0) {
      for (j = 0; j < ns_msg_count(msg, ns_s_an); j++) {
        if (ns_parserr(&msg, ns_s_an, j, &rr) != 0 || ns_rr_type(rr) != type) continue;
        if (type == ns_t_a && ns_rr_rdlen(rr) == 4) {
          inet_ntop(AF_INET, ns_rr_rdata(rr), text, sizeof text);
        } else if (type != ns_t_ptr || ns_name_uncompress(ns_msg_base(msg), ns_msg_end(msg),
                                                          ns_rr_rdata(rr), text, sizeof text) < 0) {
          continue;
        }
        printf(" %s", text);
        found = 1;
      }
    }
    if (!found) {
      printf(" -");
      fprintf(stderr, "%s: %s\n", argv[i], len < 0 ? hstrerror(h_errno) : "no answer of its type");
      status = 1;
    }
    printf("\n");
  }
  return status;
}
