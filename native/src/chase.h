/* chase.h: the pointer-chase ring a thread owns, for the modules that walk it (chase.c, and
 * stream.c's loaded latency). */
#ifndef HPB_CHASE_H
#define HPB_CHASE_H

#include <stddef.h>

#include "team.h"

struct hpb_chase_ring {
    void *map; /* the mapping (a huge page of slack for alignment) */
    size_t len;
    void **start; /* where the next walk starts (the last one ended there) */
    char *base;   /* the first line, huge-page aligned */
    size_t lines, stride;
    int huge;
    int node; /* NUMA node the ring is bound to, -1: first touch */
};

/* The ring of this thread, or NULL when none was built. */
struct hpb_chase_ring *hpb_chase_ring_of(const struct hpb_thread *th);

#endif
