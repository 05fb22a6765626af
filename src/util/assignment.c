/* assignment: see assignment.h. Rows are added one at a time; each addition finds the
 * cheapest path of alternating swaps (under the reduced costs cost - u[row] - v[col], which
 * stay >= 0 on every pair and 0 on the pairs taken) that frees a column for it, as
 * Dijkstra's search would, and moves the potentials u, v by what the path cost. */
#include "util/assignment.h"

#include <math.h>
#include <stdlib.h>

#include "util/mem.h"

double assignment_min_cost(const double *cost, int rows, int cols, int *col_of_row) {
    /* column 0 is a sentinel: row_of_col[0] is the row being added */
    double *u = xcalloc((size_t)rows + 1, sizeof(double)), *v = xcalloc((size_t)cols + 1, sizeof(double));
    double *least = xmalloc(sizeof(double) * ((size_t)cols + 1));
    int *row_of_col = xcalloc((size_t)cols + 1, sizeof(int)), *came_from = xcalloc((size_t)cols + 1, sizeof(int));
    char *seen = xmalloc((size_t)cols + 1);
    for (int r = 1; r <= rows; r++) {
        row_of_col[0] = r;
        int c0 = 0;
        for (int c = 0; c <= cols; c++) least[c] = INFINITY, seen[c] = 0;
        do { /* grow the tree of tight pairs from row r until it reaches a free column */
            seen[c0] = 1;
            int r0 = row_of_col[c0], next = 0;
            double delta = INFINITY;
            for (int c = 1; c <= cols; c++) {
                if (seen[c]) continue;
                double reduced = cost[(size_t)(r0 - 1) * cols + (c - 1)] - u[r0] - v[c];
                if (reduced < least[c]) least[c] = reduced, came_from[c] = c0;
                if (least[c] < delta) delta = least[c], next = c;
            }
            if (!next) break; /* no column reachable: a cost that is not a number; never loop on it */
            for (int c = 0; c <= cols; c++)
                if (seen[c]) u[row_of_col[c]] += delta, v[c] -= delta;
                else least[c] -= delta;
            c0 = next;
        } while (row_of_col[c0] != 0);
        if (row_of_col[c0] != 0) continue; /* row r keeps no column */
        /* swap along the path back to the sentinel */
        do {
            int prev = came_from[c0];
            row_of_col[c0] = row_of_col[prev];
            c0 = prev;
        } while (c0);
    }
    double sum = 0;
    for (int r = 0; r < rows; r++) col_of_row[r] = -1;
    for (int c = 1; c <= cols; c++)
        if (row_of_col[c]) {
            col_of_row[row_of_col[c] - 1] = c - 1;
            sum += cost[(size_t)(row_of_col[c] - 1) * cols + (c - 1)];
        }
    free(u), free(v), free(least), free(row_of_col), free(came_from), free(seen);
    return sum;
}
