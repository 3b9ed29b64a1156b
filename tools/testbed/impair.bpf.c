// Link impairment for scripts/testbed.py, on every kernel with cls_bpf (the
// testbed's loss and duplication; netem, where the kernel has it, adds
// delay, jitter and reordering): a tc eBPF program on a device's clsact
// egress hook, before the queue, that drops or duplicates a random fraction
// of the packets. Built per setting by the testbed, fractions as 32-bit
// thresholds:
//   clang -O2 -target bpf -DLOSS=P(drop)*2^32 -DDUPLICATE=P(copy)*2^32 -c impair.bpf.c
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef LOSS
#define LOSS 0u
#endif
#ifndef DUPLICATE
#define DUPLICATE 0u
#endif
// Marks a clone so that it is not cloned again when it passes this program.
#define CLONE_MARK 0x1ca15u

SEC("tc")
int impair(struct __sk_buff* skb) {
  // IP only: ARP and the like pass, so a lost neighbour request cannot
  // silence a link for a second.
  if (skb->protocol != bpf_htons(ETH_P_IP) && skb->protocol != bpf_htons(ETH_P_IPV6)) {
    return TC_ACT_OK;
  }
  if (skb->mark == CLONE_MARK) {
    skb->mark = 0;
  } else {
    if (LOSS && bpf_get_prandom_u32() < LOSS) return TC_ACT_SHOT;
    if (DUPLICATE && bpf_get_prandom_u32() < DUPLICATE) {
      skb->mark = CLONE_MARK;
      bpf_clone_redirect(skb, skb->ifindex, 0);  // the copy goes out this egress again
      skb->mark = 0;
    }
  }
  return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
