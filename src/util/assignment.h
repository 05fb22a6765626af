/* assignment: the assignment problem, solved exactly (the Hungarian algorithm in its
 * shortest-augmenting-path form, O(n^2 m)): the one-to-one pairing of rows with columns
 * whose costs add up to the least. */
#ifndef QKV_UTIL_ASSIGNMENT_H
#define QKV_UTIL_ASSIGNMENT_H

/* cost is rows x cols, row-major, with rows <= cols and every cost finite. Gives each row
 * its own column, col_of_row[r], so that the sum of cost[r][col_of_row[r]] is the least of
 * every such pairing; returns that sum. A cost that is not a number leaves the row it stops
 * at without a column (col_of_row[r] = -1) rather than searching forever. */
double assignment_min_cost(const double *cost, int rows, int cols, int *col_of_row);

#endif
