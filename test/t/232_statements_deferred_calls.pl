# 232_statements_deferred_calls.pl: bulkhead_statements counts one call per
# client top-level statement (doc/monitoring.md: "calls: top-level
# statements that started holding a permit of the workload"), but the
# queries a deferred trigger runs at the statement's (implicit) commit,
# and a deferred foreign key's check, start their executors at nesting
# level 0 and each counts as another call of the client's statement.
# hooks.c: hooks_ExecutorStart calls
# bulkhead_statements_count_call(bulkhead_nesting == 0), which is true in
# CommitTransactionCommand's AfterTriggerFireDeferred (no portal is active
# there: executor_top() would say no).
#
# Correct behaviour asserted: one INSERT, one call.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('statements_deferred',
	conf => "compute_query_id = on\nbulkhead.track_statements = on\n");

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('st', 8, 8, '60s');
	CREATE ROLE app LOGIN;
	ALTER ROLE app SET bulkhead.workload = 'st';
	CREATE TABLE pk (id int PRIMARY KEY);
	INSERT INTO pk VALUES (1);
	CREATE TABLE fk (id int REFERENCES pk DEFERRABLE INITIALLY DEFERRED);
	CREATE TABLE audited (a int);
	CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	    PERFORM count(*) FROM pk;
	    PERFORM count(*) FROM fk;
	    RETURN NULL;
	END $$;
	CREATE CONSTRAINT TRIGGER audited_later AFTER INSERT ON audited
	    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION audit();
	CREATE TABLE plain (a int);
	GRANT ALL ON pk, fk, audited, plain TO app;
});
wait_loaded($node, 'st', 8);

sub queryid
{
	my ($stmt) = @_;
	my $plan = $node->safe_psql('postgres', "EXPLAIN (VERBOSE, COSTS OFF) $stmt");
	return $plan =~ /Query Identifier: (-?\d+)/ ? $1 : 'none';
}

sub calls
{
	my ($stmt) = @_;
	my $q = queryid($stmt);
	return $node->safe_psql('postgres',
		"SELECT coalesce(sum(calls), 0) FROM bulkhead_statements WHERE queryid = $q AND workload = 'st'");
}

foreach my $stmt ('INSERT INTO plain VALUES (1)', 'INSERT INTO fk VALUES (1)',
	'INSERT INTO audited VALUES (1)')
{
	$node->safe_psql('postgres', $stmt, extra_params => [ '-U', 'app' ]);
}
is(calls('INSERT INTO plain VALUES (1)'), '1', 'control: an INSERT without deferred triggers, one call');
is(calls('INSERT INTO fk VALUES (1)'), '1', 'an INSERT checked by a deferred foreign key, one call');
is(calls('INSERT INTO audited VALUES (1)'), '1',
	'an INSERT whose deferred trigger runs two queries at commit, one call');

done_testing();
