# 180_max_hold.pl: runaway holders.  A permit held longer than its
# workload's max_hold is acted on once by the background worker:
#   log        a LOG line, once per permit;
#   cancel     the holder's statement ends with 57014 and the permit comes
#              back by its normal path (transaction, automatic and a
#              session permit taken by the cancelled statement); a holder
#              idle in a transaction has nothing to cancel: it keeps its
#              permit, and the LOG line points at idle_timeout;
#   terminate  the backend ends and its permit comes back;
#   move       the permit moves to move_to: the old workload's queue is
#              served at once while the holder keeps working, the permit
#              counts in move_to (bulkhead_activity shows it there, with
#              moved_from), move_to's statement_timeout applies from the
#              holder's next statement, and its release (by the old name)
#              returns the permit to move_to.
# over_hold, moved_out and moved_in count what happened.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use BulkheadTest;

my $node = bulkhead_node('max_hold');
$node->safe_psql('postgres', q{
	CREATE ROLE gated LOGIN;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               statement_timeout, max_hold, on_max_hold, move_to)
	VALUES ('lg',   2, 0, '0',   NULL,    '300ms', 'log',       NULL),
	       ('cn',   4, 0, '0',   NULL,    '300ms', 'cancel',    NULL),
	       ('tm',   2, 0, '0',   NULL,    '300ms', 'terminate', NULL),
	       ('slow', 1, 0, '0',   '200ms', NULL,    'log',       NULL),
	       ('rp',   1, 2, '30s', NULL,    '300ms', 'move',      'slow');
	ALTER ROLE gated SET bulkhead.workload = 'cn';
	GRANT SELECT ON bulkhead_stats, bulkhead_activity TO gated;
});
wait_loaded($node, 'lg', 2);
wait_loaded($node, 'rp', 1);

sub stat_of
{
	my ($w, $cols) = @_;
	return $node->safe_psql('postgres',
		"SELECT $cols FROM bulkhead_stats WHERE workload = '$w'");
}

# LOG lines about a process's permit of workload $w, since offset $from
sub hold_logs
{
	my ($from, $pid, $w) = @_;
	my $log = slurp_file($node->logfile, $from);
	my @lines = grep { /process $pid has held a permit of workload "$w"/ }
	  split /\n/, $log;
	return scalar @lines;
}

#
# log: one LOG line per permit, the work goes on
#
my ($s, $pid) = verbose_session($node);
my $off = -s $node->logfile;
is(sql($s, "SELECT bulkhead_acquire('lg'); SELECT pg_sleep(1.2); SELECT 'done'"),
	"\n\ndone", 'log: the holder works on past max_hold');
is(hold_logs($off, $pid, 'lg'), 1, 'log: one LOG line for the permit, though held 4 times max_hold');
like(slurp_file($node->logfile, $off),
	qr/process $pid has held a permit of workload "lg" for \d+ ms, longer than its max_hold of 300 ms/,
	'log: the line says who, which workload, how long');
is(stat_of('lg', 'running || \'/\' || over_hold'), '1/1', 'log: still held; over_hold 1');
sql($s, "SELECT bulkhead_release('lg')");
is(stat_of('lg', 'running'), '0', 'log: released by its holder');

#
# cancel: a transaction permit's statement ends with 57014, the rollback
# returns the permit
#
sql($s, 'BEGIN');
sql($s, "SELECT bulkhead_acquire_xact('cn')");
my $t0 = time();
my ($out, $err) = sql2($s, 'SELECT pg_sleep(20)');
my $took = time() - $t0;
like($err, qr/57014/, 'cancel (transaction permit): the statement ends with 57014');
cmp_ok($took, '<', 5, "cancel: within seconds of max_hold (${took}s)");
sql($s, 'ROLLBACK');
is(stat_of('cn', 'running || \'/\' || over_hold'), '0/1',
	'cancel (transaction permit): the permit came back at the rollback');

# a session permit taken by the cancelled statement is returned with it
($out, $err) = sql2($s, "SELECT bulkhead_acquire('cn'), pg_sleep(20)");
like($err, qr/57014/, 'cancel (session permit, same statement): 57014');
is(stat_of('cn', 'running'), '0',
	'cancel (session permit): the failed acquiring statement returned it');

# automatic scope (bulkhead.workload through the role): the transaction's
# statement is cancelled and its permit returned
my $g = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'gated' ]);
$g->query_safe('\\set VERBOSITY verbose');
($out, $err) = sql2($g, 'SELECT pg_sleep(20)');
like($err, qr/57014/, 'cancel (automatic permit): the statement ends with 57014');
ok(poll_until($node, "SELECT running = 0 FROM bulkhead_stats WHERE workload = 'cn'"),
	'cancel (automatic permit): the permit came back');
is(stat_of('cn', 'over_hold'), '3', 'cancel: over_hold counts each permit once');

#
# cancel of an idle holder: nothing to cancel; it keeps its permit, and
# the LOG line says so
#
$off = -s $node->logfile;
sql($s, 'BEGIN');
sql($s, "SELECT bulkhead_acquire_xact('cn')");
usleep(900_000);
is(hold_logs($off, $pid, 'cn'), 1, 'idle holder: one LOG line');
like(slurp_file($node->logfile, $off),
	qr/idle, waiting for its client: there is no statement to cancel.*\n.*idle_timeout/,
	'idle holder: the line says there was nothing to cancel, and names idle_timeout');
is(sql($s, 'SELECT 1'), '1', 'idle holder: the session goes on, its transaction intact');
is(stat_of('cn', 'running || \'/\' || over_hold'), '1/4', 'idle holder: still holds; counted once');
sql($s, 'COMMIT');
is(stat_of('cn', 'running'), '0', 'idle holder: the commit returned the permit');

#
# terminate: the backend ends and its permit comes back
#
my ($t, $tpid) = verbose_session($node);
send_async($t, "SELECT bulkhead_acquire('tm'); SELECT pg_sleep(20);");
ok(poll_until($node, "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $tpid)", 10),
	'terminate: the holder is gone');
ok(poll_until($node, "SELECT running = 0 AND over_hold = 1 FROM bulkhead_stats WHERE workload = 'tm'"),
	'terminate: its permit came back; over_hold 1');
close_session($t);

#
# move: reports (rp, B = 1) moves a long holder to slow; rp's waiter is
# served at once while the moved holder keeps working
#
my ($a, $apid) = verbose_session($node);
my ($b, $bpid) = verbose_session($node);
sql($a, "SELECT bulkhead_acquire('rp')");
send_async($a, 'SELECT pg_sleep(1.5);');
send_async($b, "SELECT bulkhead_acquire('rp', '30s'); SELECT bulkhead_release('rp');");
($out, $err) = finish_async($b);
is($err, '', "move: rp's waiter is granted");
my $a_still = $node->safe_psql('postgres',
	"SELECT state = 'active' FROM pg_stat_activity WHERE pid = $apid");
is($a_still, 't', 'move: ... while the moved holder is still at work');
is($node->safe_psql('postgres', q{
	SELECT string_agg(workload || ':' || running || '/' || over_hold || '/'
	                  || moved_out || '/' || moved_in, ',' ORDER BY workload)
	  FROM bulkhead_stats WHERE workload IN ('rp', 'slow')}),
	'rp:0/1/1/0,slow:1/0/0/1',
	'move: the permit counts in slow (which had room), rp served its waiter (who is done)');
is($node->safe_psql('postgres',
		"SELECT workload || ':' || coalesce(moved_from, '-') FROM bulkhead_activity WHERE pid = $apid"),
	'slow:rp', 'move: bulkhead_activity shows the permit in slow, moved from rp');
finish_async($a);
# slow's statement_timeout (200 ms) applies from the holder's next statement
($out, $err) = sql2($a, 'SELECT pg_sleep(1)');
like($err, qr/57014.*statement timeout/s,
	"move: the holder's next statement runs under slow's statement_timeout");
is(sql($a, 'SHOW statement_timeout'), '200ms', "move: slow's guard is in force");
# released by the name it was taken with
is(sql($a, "SELECT bulkhead_release('rp')"), '', "move: bulkhead_release('rp') returns it");
is($node->safe_psql('postgres', q{
	SELECT string_agg(workload || ':' || running || '/' || released, ',' ORDER BY workload)
	  FROM bulkhead_stats WHERE workload IN ('rp', 'slow')}),
	'rp:0/1,slow:0/1', 'move: the release returned the permit to slow (rp counts its waiter\'s)');
is(sql($a, 'SHOW statement_timeout'), '0', "move: the session's own statement_timeout is back");

# a move beyond move_to's limit: slow (B = 1) is full, the move still
# happens, and slow grants nothing new until it is back under
my ($c, $cpid) = verbose_session($node);
sql($c, "SELECT bulkhead_acquire('slow')");
sql($a, "SELECT bulkhead_acquire('rp')");
ok(poll_until($node, "SELECT running = 2 FROM bulkhead_stats WHERE workload = 'slow'", 10),
	'move beyond the limit: slow runs 2 with B = 1 (a move never blocks)');
is(sql($b, "SELECT bulkhead_try_acquire('slow')"), 'f',
	'move beyond the limit: slow grants nothing new meanwhile');
sql($c, "SELECT bulkhead_release('slow')");
is(sql($b, "SELECT bulkhead_try_acquire('slow')"), 'f',
	'move beyond the limit: still at its limit after one release');
sql($a, "SELECT bulkhead_release('rp')");
is(sql($b, "SELECT bulkhead_try_acquire('slow')"), 't',
	'move beyond the limit: back under, slow grants again');
sql($b, "SELECT bulkhead_release('slow')");

is($node->safe_psql('postgres', q{
	SELECT bool_and(running = 0 AND queued = 0) FROM bulkhead_stats}),
	't', 'nothing is left held or queued');

close_session($_) for ($s, $g, $a, $b, $c);
$node->stop;
done_testing();
