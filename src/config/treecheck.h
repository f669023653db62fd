/*-------------------------------------------------------------------------
 *
 * treecheck.h
 *	  The rules of the trees of budgets across rows of bulkhead_workload
 *	  (treecheck.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_TREECHECK_H
#define BULKHEAD_TREECHECK_H

#include "shmem/base.h"

#include "utils/relcache.h"

extern void bulkhead_check_trees(Relation rel);

#endif							/* BULKHEAD_TREECHECK_H */
