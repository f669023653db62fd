/*-------------------------------------------------------------------------
 *
 * deadlock_modes.h
 *	  The deadlock modes of bulkhead_stress (deadlock_modes.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DEADLOCK_MODES_H
#define DEADLOCK_MODES_H

#include <stdint.h>

/* Monotonic clock in microseconds (bulkhead_stress.c) */
extern int64_t now_us(void);

/* Run mode "nocycle" or "cycle"; returns the exit status of the tool */
extern int	deadlock_stress_main(const char *mode, int clients, int seconds,
								 const char *conninfo);

/* Run the guards mode (guard_modes.c); returns the exit status of the tool */
extern int	guard_stress_main(int clients, int seconds, const char *conninfo);

/* Run the budgets mode (budget_modes.c); seed 0 takes one from the clock */
extern int	budget_stress_main(int clients, int seconds, const char *conninfo,
							   uint64_t seed);

/* Run the holds mode (hold_modes.c); seed 0 takes one from the clock */
extern int	hold_stress_main(int clients, int seconds, const char *conninfo,
							 uint64_t seed);

/* Run the tenants mode (tenant_modes.c); seed 0 takes one from the clock */
extern int	tenant_stress_main(int clients, int seconds, const char *conninfo,
							   uint64_t seed);

/* Run the lanes mode (lane_modes.c); seed 0 takes one from the clock */
extern int	lane_stress_main(int clients, int seconds, const char *conninfo,
							 uint64_t seed);

/* Run the memory mode (memory_modes.c); seed 0 takes one from the clock */
extern int	memory_stress_main(int clients, int seconds, const char *conninfo,
							   uint64_t seed);

/* Run the priority mode (priority_modes.c, 1.5) */
extern int	priority_stress_main(int clients, int seconds, const char *conninfo);

#endif							/* DEADLOCK_MODES_H */
