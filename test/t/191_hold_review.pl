# 191_hold_review.pl: runaway holders moved by max_hold, the guards of
# move_to (review of issue 23).  The contract: a move goes "without ending
# the work", and "move_to's guards apply from the holder's next statement"
# (and stay while the permit is held):
#   1. a statement that runs nested queries (a DO block) and is moved while
#      it runs is not cancelled by move_to's statement_timeout: that applies
#      from the next statement;
#   2. a session permit moved while its transaction block has failed gets
#      move_to's guard after the ROLLBACK;
#   3. a transaction permit taken before a savepoint keeps move_to's guard
#      after ROLLBACK TO SAVEPOINT (the permit is still held, in move_to);
#   4. a session permit moved out of a workload with a statement_timeout
#      into one without: the next statement is not cancelled at the old
#      workload's timeout.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $node = bulkhead_node('hold_review');
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, statement_timeout)
	VALUES ('slow', 5, '500ms'), ('free', 5, NULL);
	INSERT INTO bulkhead_workload (name, max_running, statement_timeout,
	                               max_hold, on_max_hold, move_to)
	VALUES ('rep', 2, NULL, '200ms', 'move', 'slow'),
	       ('g1',  2, '1s', '200ms', 'move', 'free');
});
wait_loaded($node, 'rep', 2);
wait_loaded($node, 'g1', 2);

sub moved_to
{
	my ($pid, $w) = @_;
	return poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $pid"
		  . " AND workload = '$w' AND moved_from IS NOT NULL", 30);
}

my ($s, $pid) = verbose_session($node);

#
# 1. moved while a DO block runs its queries: the block runs to its end
#
my ($out, $err) = sql2($s, q{
DO $$
BEGIN
	PERFORM bulkhead_acquire('rep');
	FOR i IN 1..15 LOOP
		PERFORM pg_sleep(0.2);
		PERFORM count(*) FROM pg_class;
	END LOOP;
END $$;
SELECT 'block done'});
is($err, '', 'nested: no error in the moved statement (move_to\'s timeout waits for the next statement)');
like($out, qr/block done/, 'nested: the statement moved while it ran goes to its end');
ok(moved_to($pid, 'slow'), 'nested: the permit was moved to slow');
like(sql($s, 'SELECT pg_sleep(2)'), qr/57014/,
	'nested: the next statement runs under slow\'s statement_timeout');
sql($s, "SELECT bulkhead_release('rep')");

#
# 2. moved while the transaction block has failed: the guard applies after
#    the ROLLBACK
#
sql($s, "SELECT bulkhead_acquire('rep')");
sql($s, 'BEGIN');
sql($s, 'SELECT 1/0');
ok(moved_to($pid, 'slow'), 'failed block: the permit was moved to slow');
sql($s, 'ROLLBACK');
is(sql($s, 'SHOW statement_timeout'), '500ms',
	'failed block: slow\'s statement_timeout applies after the ROLLBACK');
sql($s, "SELECT bulkhead_release('rep')");
is(sql($s, 'SHOW statement_timeout'), '0', 'failed block: restored at release');

#
# 3. a transaction permit taken before a savepoint, moved inside it: the
#    rollback to the savepoint keeps the permit, and keeps slow's guard
#
sql($s, 'BEGIN');
sql($s, "SELECT bulkhead_acquire_xact('rep')");
sql($s, 'SAVEPOINT s');
ok(moved_to($pid, 'slow'), 'savepoint: the permit was moved to slow');
is(sql($s, 'SHOW statement_timeout'), '500ms', 'savepoint: slow\'s guard applies');
sql($s, 'ROLLBACK TO SAVEPOINT s');
is( $node->safe_psql('postgres',
		"SELECT workload FROM bulkhead_activity WHERE pid = $pid"),
	'slow', 'savepoint: the permit is still held, in slow');
is(sql($s, 'SHOW statement_timeout'), '500ms',
	'savepoint: slow\'s guard stays after ROLLBACK TO SAVEPOINT');
sql($s, 'COMMIT');
is(sql($s, 'SHOW statement_timeout'), '0', 'savepoint: gone with the transaction');

#
# 4. moved from g1 (statement_timeout 1s) to free (none): the next
#    statement is not cancelled at 1 s
#
sql($s, "SELECT bulkhead_acquire('g1')");
ok(moved_to($pid, 'free'), 'to no guard: the permit was moved to free');
is(sql($s, "SELECT pg_sleep(2.5); SELECT 'slept'"), "\nslept",
	'to no guard: the next statement is not cancelled at g1\'s statement_timeout');
is(sql($s, 'SHOW statement_timeout'), '0', 'to no guard: the session\'s own value');
sql($s, "SELECT bulkhead_release('g1')");

#
# every permit came back
#
is( $node->safe_psql('postgres',
		"SELECT string_agg(workload || ':' || running || '/' || (acquired + moved_in - released - moved_out), ',' ORDER BY workload) FROM bulkhead_stats"),
	'free:0/0,g1:0/0,rep:0/0,slow:0/0', 'nothing held, nothing lost');

close_session($s);
$node->stop;
done_testing();
