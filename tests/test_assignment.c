/* The assignment problem (util/assignment.h) against every pairing tried by hand. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "util/assignment.h"
#include "util/rng.h"

/* The least sum over every one-to-one pairing of rows with columns, by trying them all */
static double least_by_search(const double *cost, int rows, int cols, int row, unsigned used, double sum) {
    if (row == rows) return sum;
    double best = INFINITY;
    for (int c = 0; c < cols; c++)
        if (!(used & 1u << c)) {
            double s = least_by_search(cost, rows, cols, row + 1, used | 1u << c, sum + cost[row * cols + c]);
            if (s < best) best = s;
        }
    return best;
}

/* Random matrices up to 6 x 7 (with ties, zeros and negative costs, the way align_match
 * hands them over): the pairing is one to one, its sum is what is returned, and no pairing
 * of the rows sums to less */
static void test_assignment_is_the_least_pairing(void) {
    Rng r;
    rng_seed(&r, 7);
    int wrong = 0, not_one_to_one = 0, tried = 0;
    for (int rows = 1; rows <= 6; rows++)
        for (int cols = rows; cols <= 7; cols++)
            for (int k = 0; k < 40; k++, tried++) {
                double cost[6 * 7];
                int col_of_row[6];
                for (int i = 0; i < rows * cols; i++) {
                    double u = rng_uniform(&r);
                    /* a third of the pairs cost 0 (no link), the rest a few values that tie */
                    cost[i] = u < 0.33 ? 0.0 : k % 2 ? -floor(u * 4) : -10.0 - log(u);
                }
                memset(col_of_row, -1, sizeof col_of_row);
                double got = assignment_min_cost(cost, rows, cols, col_of_row), sum = 0;
                unsigned used = 0;
                for (int i = 0; i < rows; i++) {
                    if (col_of_row[i] < 0 || col_of_row[i] >= cols || used & 1u << col_of_row[i]) not_one_to_one++;
                    else used |= 1u << col_of_row[i], sum += cost[i * cols + col_of_row[i]];
                }
                double best = least_by_search(cost, rows, cols, 0, 0, 0);
                if (fabs(got - best) > 1e-9 || fabs(sum - got) > 1e-9) wrong++;
            }
    CHECK(not_one_to_one == 0, "%d pairings of %d gave a row no column or a column twice", not_one_to_one, tried);
    CHECK(wrong == 0, "%d of %d pairings cost more than the least, or not what was returned", wrong, tried);
    /* the case a greedy choice gets wrong: taking the cheapest pair first (row 0, col 0)
     * leaves row 1 its expensive column */
    double greedy_trap[2 * 2] = {-5, -4, -4.5, 0}, trap_sum;
    int trap[2];
    trap_sum = assignment_min_cost(greedy_trap, 2, 2, trap);
    CHECK(trap[0] == 1 && trap[1] == 0 && trap_sum == -8.5, "rows to %d %d (sum %g), want 1 0 (-8.5)", trap[0], trap[1],
          trap_sum);
    /* a row of costs that are not numbers gets no column, and the search ends */
    double nan_row[2 * 2] = {NAN, NAN, -1, -2};
    int two[2];
    assignment_min_cost(nan_row, 2, 2, two);
    CHECK(two[0] == -1 && two[1] == 1, "rows to %d %d, want -1 1", two[0], two[1]);
}

const TestCase assignment_tests[] = {
    {"assignment_is_the_least_pairing", test_assignment_is_the_least_pairing},
    {NULL, NULL},
};
