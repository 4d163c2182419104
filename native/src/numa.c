/* numa.c: memory binding and placement read-back through the mbind/get_mempolicy syscalls. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hpb.h"
#include "team.h"

#define MPOL_BIND_ 2
#define MPOL_F_NODE_ (1 << 0)
#define MPOL_F_ADDR_ (1 << 1)
#define MAX_NODES 1024

int hpb_bind_memory(void *addr, size_t len, int node)
{
    if (node < 0 || node >= MAX_NODES) return -EINVAL;
    unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))];
    memset(mask, 0, sizeof mask);
    mask[node / (8 * sizeof(unsigned long))] = 1ul << (node % (8 * sizeof(unsigned long)));
    if (syscall(SYS_mbind, addr, len, MPOL_BIND_, mask, (unsigned long)MAX_NODES, 0u) != 0)
        return -errno;
    return 0;
}

int hpb_memory_node(const void *addr, int *node)
{
    if (!addr || !node) return -EINVAL;
    int n = -1;
    if (syscall(SYS_get_mempolicy, &n, NULL, 0ul, addr, MPOL_F_NODE_ | MPOL_F_ADDR_) != 0)
        return -errno;
    *node = n;
    return 0;
}
