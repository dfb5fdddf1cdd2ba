/*
 * bench/fleet_wake_cost.c -- what one sleep and wake-up costs the threads
 * involved on this machine, the fixed part of the router daemon's CPU per
 * query that no code of the daemon's can remove (bench/fleet_daemon_cpu.sh
 * builds and runs it last): two threads pass one byte back and forth
 * through two pipes, each sleeping in read(2) until the other writes, N
 * round trips (argv[1], default 20000), first both pinned to CPU 0 (every
 * wake-up on the waker's CPU), then on CPUs 0 and 1 (every wake-up sent to
 * the other CPU, which is idle or about to be). Prints each thread's CPU
 * time per round trip (CLOCK_THREAD_CPUTIME_ID: what schedstat charges
 * it): per round trip each thread writes once (waking the other), reads
 * once and is woken once. Needs two CPUs for the second line.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef struct side {
    int in, out; /* read from in, write to out */
    int cpu, first, n;
    double us_per_rt;
} side;

static double thread_cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void *run(void *arg)
{
    side *s = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(s->cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
        abort(); /* pair() checked the CPU is ours */
    char c = 'x';
    double t0 = thread_cpu_us();
    for (int i = 0; i < s->n; i++) {
        if (s->first && write(s->out, &c, 1) != 1)
            abort();
        if (read(s->in, &c, 1) != 1)
            abort();
        if (!s->first && write(s->out, &c, 1) != 1)
            abort();
    }
    s->us_per_rt = s->n ? (thread_cpu_us() - t0) / s->n : -1;
    return NULL;
}

/* Whether this process may run on cpu: a side that cannot be pinned must
 * not start, or its partner would wait in read(2) for it forever. */
static int cpu_ours(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_ISSET(cpu, &set);
}

static int pair(int cpu_a, int cpu_b, int n, double *a_us, double *b_us)
{
    if (!cpu_ours(cpu_a) || !cpu_ours(cpu_b))
        return -1;
    int ab[2], ba[2];
    if (pipe(ab) != 0 || pipe(ba) != 0)
        return -1;
    side a = {ba[0], ab[1], cpu_a, 1, n, 0}, b = {ab[0], ba[1], cpu_b, 0, n, 0};
    pthread_t ta, tb;
    if (pthread_create(&tb, NULL, run, &b) != 0)
        return -1;
    if (pthread_create(&ta, NULL, run, &a) != 0)
        abort();
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    close(ab[0]), close(ab[1]), close(ba[0]), close(ba[1]);
    *a_us = a.us_per_rt;
    *b_us = b.us_per_rt;
    return a.n && b.n ? 0 : -1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    if (n <= 0)
        n = 20000;
    double a, b;
    if (pair(0, 0, n, &a, &b) == 0)
        printf("wake-ups on one CPU: %.2f / %.2f us of thread CPU per round trip "
               "(each thread: a write, a read, a sleep and a wake-up)\n", a, b);
    if (pair(0, 1, n, &a, &b) == 0)
        printf("wake-ups across two CPUs: %.2f / %.2f us of thread CPU per round trip\n",
               a, b);
    else
        printf("wake-ups across two CPUs: not measured (one CPU only)\n");
    return 0;
}
