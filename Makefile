# bulkhead: PGXS build and the PostgreSQL-style test suites.
#
#   make && make install            build and install into pg_config's server
#   make installcheck               pg_regress, isolation and TAP suites, each
#                                   against a throwaway preloaded instance
#                                   (run as a non-root user: initdb refuses root)
#   make demo                       scripts/demo.sh: a narrated throwaway cluster

EXTENSION = bulkhead
MODULE_big = bulkhead
# src/ by subsystem, each folder's README first; a folder calls only the
# folders listed before it (test/structure/folders)
OBJS = \
	src/shmem/shmem.o src/shmem/stats.o \
	src/acl/disclose.o \
	src/workload/admit.o src/workload/blockers.o src/workload/budget.o src/workload/importance.o src/workload/keys.o src/workload/rank.o src/workload/slot.o src/workload/slotstats.o src/workload/statsfile.o \
	src/record/statements.o src/record/statementsview.o src/record/waitlog.o \
	src/deadlock/deadlock.o src/deadlock/deadlockfree.o src/deadlock/lockholder.o src/deadlock/waitgraph.o \
	src/guards/caps.o src/guards/capsparse.o src/guards/guard.o \
	src/permit/local.o src/permit/movedpermit.o src/permit/permit.o src/permit/permitfuncs.o src/permit/permitwait.o \
	src/memory/grantlevel.o src/memory/grantqueue.o src/memory/grants.o src/memory/grantstate.o src/memory/memory.o src/memory/memreq.o src/memory/utilreq.o \
	src/memory/memest.o src/memory/reqtotal.o src/memory/nodelimit.o src/memory/nodepeak.o src/memory/feedback.o src/memory/feedbackrule.o src/memory/feedbackfile.o \
	src/config/catalog.o src/config/rules.o src/config/tables.o src/config/treecheck.o \
	src/statement/hooks.o src/statement/lanes.o src/statement/toplevel.o src/statement/transparent.o src/statement/utility.o \
	src/views/history.o src/views/historyfile.o src/views/memviews.o src/views/prioviews.o src/views/views.o \
	src/worker/adaptive.o src/worker/cpus.o src/worker/holdersample.o src/worker/loader.o src/worker/runaway.o src/worker/worker.o \
	src/bulkhead.o
DATA = sql/bulkhead--1.0.sql sql/bulkhead--1.1.sql sql/bulkhead--1.0--1.1.sql \
	sql/bulkhead--1.2.sql sql/bulkhead--1.1--1.2.sql \
	sql/bulkhead--1.3.sql sql/bulkhead--1.2--1.3.sql \
	sql/bulkhead--1.4.sql sql/bulkhead--1.3--1.4.sql \
	sql/bulkhead--1.5.sql sql/bulkhead--1.4--1.5.sql
PG_CPPFLAGS = -I$(srcdir)/src
# hidden: see src/shmem/base.h
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror \
	-fvisibility=hidden

# Test instances and databases are UTF8 with the C locale whatever the
# caller's environment, so that expected output is the same for everyone
# (multi-byte workload names, sorting, messages).
FIXED_LOCALE = --encoding=UTF8 --no-locale

# pg_regress: sql/<name>.sql against expected/<name>.out
REGRESS = setup workload_table permits call_shapes failed_statement scopes guards \
	guard_levels errors stats transparent bad_input privileges rules adaptive \
	budgets holds lanes memory memory_use history statements waitlog importance
REGRESS_OPTS = --temp-instance=./tmp_check_regress $(FIXED_LOCALE) \
	--temp-config=$(srcdir)/test/regress.conf

# isolation: test/specs/<name>.spec against test/expected/<name>.out
ISOLATION = reject_full wait_timeout handoff cancel_waiter limit_raise \
	xact_release session_kept shadow transparent_queue \
	deadlock_cycles deadlock_transparent blocking_pids pause \
	budget_borrow budget_least_served budget_no_credit budget_no_preempt \
	budget_reparent budget_levels lane_move memory_wait memory_priority memory_small \
	priority_importance priority_aging priority_lock_holder
ISOLATION_OPTS = --inputdir=$(srcdir)/test $(FIXED_LOCALE) \
	--temp-instance=./tmp_check_iso \
	--temp-config=$(srcdir)/test/isolation.conf

# TAP: test/t/*.pl (PostgreSQL::Test::Cluster), TAP_JOBS files at a time
# (each file's servers are its own; PostgreSQL::Test::Cluster takes its
# ports under a lock), the slowest first (test/t/testrules.yml, read by
# prove from the tree's top directory).  TAP_JOBS=1: one at a time.
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl
TAP_JOBS = 4

EXTRA_CLEAN = tmp_check_regress tmp_check_iso output_iso results \
	regression.diffs regression.out

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# (after pgxs, which empties PROVE_FLAGS; PROVE_FLAGS=... on the command
# line still replaces it)
PROVE_FLAGS += -j$(TAP_JOBS) --timer
export HARNESS_RULESFILE = test/t/testrules.yml

.PHONY: demo
demo:
	bash $(srcdir)/scripts/demo.sh
