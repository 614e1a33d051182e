/*
 * syscost: what this machine charges for the two things every Granary request is made of,
 * a system call and a hand-off between two threads. Prints
 *   - the cost of one trivial system call (getppid through syscall(2)), in ns;
 *   - the round trip of a futex ping-pong between two threads (one wakes the other, which
 *     wakes it back), in us: two thread switches, as a FUSE request, a gRPC call handed to an
 *     event loop, or a Raft log append handed to the log worker costs each time.
 * On bare metal expect ~0.1 us and ~5-10 us; a paravirtualized VM traps both to its hypervisor.
 * Build and run with bench/syscost.sh. Linux only (futex(2)).
 */
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_int turn;      /* 1: the ponger's turn, 0: the pinger's */
static int rounds = 100000;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void futex_wait(atomic_int *a, int expected) {
    syscall(SYS_futex, a, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(atomic_int *a) {
    syscall(SYS_futex, a, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *pong(void *unused) {
    (void) unused;
    for (int i = 0; i < rounds; i++) {
        while (atomic_load(&turn) != 1) {
            futex_wait(&turn, 0);
        }
        atomic_store(&turn, 0);
        futex_wake(&turn);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        rounds = atoi(argv[1]);
        if (rounds < 1) {
            fprintf(stderr, "usage: syscost [ROUNDS >= 1]\n");
            return 2;
        }
    }
    int calls = rounds * 10;
    double t = now_s();
    for (int i = 0; i < calls; i++) {
        syscall(SYS_getppid);
    }
    printf("system call (getppid):       %8.0f ns\n", (now_s() - t) / calls * 1e9);

    pthread_t thread;
    if (pthread_create(&thread, NULL, pong, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    t = now_s();
    for (int i = 0; i < rounds; i++) {
        atomic_store(&turn, 1);
        futex_wake(&turn);
        while (atomic_load(&turn) != 0) {
            futex_wait(&turn, 1);
        }
    }
    double rtt = (now_s() - t) / rounds;
    pthread_join(thread, NULL);
    printf("thread hand-off round trip:  %8.1f us (futex ping-pong, %d rounds)\n", rtt * 1e6, rounds);
    return 0;
}
