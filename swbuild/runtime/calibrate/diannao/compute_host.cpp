/* compute_host.cpp - the compute program: float __bang_conv of two sizes, barriers of a
 * cluster and of all cores, and launches of an empty kernel. Prints one JSON document;
 * argument: repetitions. */
#include "calib.h"

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 32;
    char f[256];
    cnrtQueue_t q;
    cnrtInit(0);
    cnrtQueueCreate(&q);
    calib_begin("compute");
    double empty = calib_time("k_empty", [&] { calib_empty(q); }, q);
    static const int shapes[][2] = {{4, 1}, {8, 3}, {16, 3}};   /* input h x h, kernel k x k */
    for (auto &s : shapes) {
        double one = calib_time("k_conv", [&] { calib_conv(q, s[0], s[1], 1); }, q);
        double many = calib_time("k_conv", [&] { calib_conv(q, s[0], s[1], 1 + reps); }, q);
        int ho = s[0] - s[1] + 1;
        snprintf(f, sizeof f, "\"kind\": \"conv\", \"h\": %d, \"k\": %d, \"ci\": 64, \"co\": 64, \"macs\": %lld, "
                 "\"ops\": %d, \"time\": %.9g", s[0], s[1], (long long)ho * ho * 64 * s[1] * s[1] * 64, reps, many - one);
        calib_emit(f);
    }
    for (int all = 0; all < 2; ++all) {
        double t = calib_time("k_sync", [&] { calib_sync(q, all, reps); }, q);
        double t0 = calib_time("k_sync", [&] { calib_sync(q, all, 0); }, q);
        snprintf(f, sizeof f, "\"kind\": \"sync\", \"scope\": \"%s\", \"ops\": %d, \"time\": %.9g",
                 all ? "all" : "cluster", reps, t - t0);
        calib_emit(f);
    }
    double t = calib_time("k_empty", [&] { for (int r = 0; r < reps; ++r) calib_empty(q); }, q);
    snprintf(f, sizeof f, "\"kind\": \"launch\", \"ops\": %d, \"time\": %.9g", reps, t);
    (void)empty;
    calib_emit(f);
    cnrtQueueDestroy(q);
    return calib_end();
}
