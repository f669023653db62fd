# 231_rewrite_rebuilds_uncharged.pl: statements that rebuild every index of
# a table with maintenance_work_mem get no grant and run at the session's
# full maintenance_work_mem, past the workload's max_memory:
#   ALTER TABLE ... SET LOGGED / SET UNLOGGED, ALTER TABLE ... ADD COLUMN
#   with a volatile default (any ALTER TABLE that rewrites the table:
#   finish_heap_swap -> reindex_relation), REFRESH MATERIALIZED VIEW (the
#   same swap).
# memreq.c: bulkhead_memreq_utility / alter_builds_index charge an ALTER
# TABLE only for ADD PRIMARY KEY/UNIQUE/EXCLUDE and ALTER COLUMN TYPE, and
# REFRESH not at all (its query is charged as a statement; its index
# rebuild after the query's executor ended is not).
#
# Correct behaviour asserted: each of them builds its index under the
# workload's 2 MB, as REINDEX (the control, charged) does: shrunk to the
# 1 MB floor, not at 64 MB.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('rewrite_rebuilds', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('maint', 8, 8, '60s', '2MB', '0');
	-- the maintenance_work_mem an index build runs with, as a notice
	CREATE FUNCTION mwm_seen(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
	BEGIN
	    RAISE NOTICE 'maintenance_work_mem %', current_setting('maintenance_work_mem');
	    RETURN $1;
	END $$;
	CREATE TABLE rw (a int);
	INSERT INTO rw VALUES (1);
	CREATE INDEX rw_e ON rw (mwm_seen(a));
	CREATE MATERIALIZED VIEW rw_mv AS SELECT 1 AS a;
	CREATE INDEX rw_mv_e ON rw_mv (mwm_seen(a));
});
wait_loaded($node, 'maint', 8);

# the maintenance_work_mem the index build of $stmt saw, in workload maint
sub seen
{
	my ($stmt) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', qq{
		SET bulkhead.exempt_superuser = off;
		SET bulkhead.workload = 'maint';
		SET maintenance_work_mem = '64MB';
		$stmt;});
	my @seen = $err =~ /maintenance_work_mem (\S+)/g;
	return join(',', @seen) || "no build: $err";
}

is(seen('REINDEX INDEX rw_e'), '1MB', 'control: REINDEX is charged, shrunk to the 1 MB floor');
is(seen('ALTER TABLE rw SET UNLOGGED'), '1MB',
	'ALTER TABLE SET UNLOGGED rebuilds its index under the grant, not at 64 MB');
is(seen('ALTER TABLE rw SET LOGGED'), '1MB',
	'ALTER TABLE SET LOGGED rebuilds its index under the grant, not at 64 MB');
is(seen('ALTER TABLE rw ADD COLUMN r float8 DEFAULT random()'), '1MB',
	'ALTER TABLE ADD COLUMN (volatile default: a rewrite) rebuilds its index under the grant');
is(seen('REFRESH MATERIALIZED VIEW rw_mv'), '1MB',
	'REFRESH MATERIALIZED VIEW rebuilds its index under the grant, not at 64 MB');
is($node->safe_psql('postgres', 'SELECT memory_granted FROM bulkhead_memory'), '0',
	'nothing left granted');

done_testing();
