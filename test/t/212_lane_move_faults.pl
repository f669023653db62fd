# 212_lane_move_faults.pl: no permit is lost around a move (1.3).  A
# statement rule moves a transaction's permit from web to heavy: web's
# permit goes back as the wait in heavy begins (web's waiter is served at
# once), and the wait is an ordinary one.  That wait ended by a cancel, by
# statement_timeout, or by a terminate: SQLSTATE 57014 (or the backend
# gone), counted as cancelled in heavy, nothing held by the mover, and in
# every lane acquired + moved_in = released + moved_out + running, with
# running the permits really held (rows of bulkhead_activity).
#
# And the guards around a move: the old lane's statement_timeout is lifted
# as the wait begins (it does not cut the wait short), the new lane's is
# applied at the grant and counts for the statement from the grant (the
# wait not counted against it).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

my $node = bulkhead_node('lane_move_faults');
lane_functions($node);

# app: web (one permit), costly statements to heavy (one permit, held by a
# superuser's explicit acquire while the rounds run).  gapp: gweb (guard
# 500 ms), costly statements to gheavy (guard 2.5 s).
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               statement_timeout, settings)
	VALUES ('web', 1, 4, '60s', NULL, NULL),
	       ('heavy', 1, 4, '60s', NULL, '{work_mem=1MB}'),
	       ('gweb', 2, 4, '60s', '500ms', NULL),
	       ('gheavy', 1, 4, '60s', '2500ms', NULL);
	CREATE ROLE app LOGIN;
	CREATE ROLE gapp LOGIN;
	GRANT pg_read_all_stats TO app, gapp;
	INSERT INTO bulkhead_rule (position, role, workload) VALUES (1, 'app', 'web');
	INSERT INTO bulkhead_rule (position, role, workload, min_cost) VALUES (2, 'app', 'heavy', 100000);
	INSERT INTO bulkhead_rule (position, role, workload) VALUES (3, 'gapp', 'gweb');
	INSERT INTO bulkhead_rule (position, role, workload, min_cost) VALUES (4, 'gapp', 'gheavy', 100000);
});
wait_loaded($node, 'gheavy', 1);
for my $role ('app', 'gapp')
{
	ok( poll_until(
			$node, qq{
			SET bulkhead.exempt_superuser = off; SET ROLE $role;
			SELECT (SELECT workload FROM bulkhead_classify('SELECT costly()')) = 'heavy'
			    OR (SELECT workload FROM bulkhead_classify('SELECT costly()')) = 'gheavy'}),
		"the statement rules of $role are loaded");
}
$node->safe_psql('postgres',
	"SELECT bulkhead_stats_reset(w) FROM unnest('{web,heavy,gweb,gheavy}'::text[]) w");

# A session of $role, errors shown with their SQLSTATE
sub role_session
{
	my ($role) = @_;
	my $s = session($node, 'postgres', $role);
	$s->query_safe('\\set VERBOSITY verbose');
	return $s;
}

# Send a query without waiting for it; and wait for what was sent (a marker
# psql prints, not a query: the gate would queue a query), returning its
# (stdout, stderr)
sub send_q
{
	my ($s, $q) = @_;
	$s->query_until(qr/sent\n/, "\\echo sent\n$q\n");
	return;
}

sub finish_q
{
	my ($s) = @_;
	my $out = $s->query_until(qr/q-done\n/, "\\echo q-done\n");
	$out =~ s/\n?q-done\n$//;
	my $err = $s->{stderr};
	$s->{stderr} = '';
	return ($out, $err);
}

# "workload/state/scope/moved_from" of pid's rows in bulkhead_activity
sub rows_of
{
	my ($pid) = @_;
	return $node->safe_psql(
		'postgres', qq{
		SELECT coalesce(string_agg(workload || '/' || state || '/' || scope || '/'
		                           || coalesce(moved_from, '-'), ',' ORDER BY workload), '')
		  FROM bulkhead_activity WHERE pid = $pid});
}

sub counts
{
	my ($w) = @_;
	return $node->safe_psql('postgres',
		"SELECT running || '/' || queued || ' cancelled ' || cancelled || ' timed_out ' || timed_out"
		  . " FROM bulkhead_stats WHERE workload = '$w'");
}

# The superuser's explicit acquire holds heavy's one permit
my $holder = session($node);
is(sql($holder, "SELECT bulkhead_acquire('heavy')"), '', 'a superuser holds heavy');

my $waiter = role_session('app');
my $wpid = sql($waiter, 'SELECT pg_backend_pid()');

# One round: the mover's transaction holds web, the waiter queues for web,
# the mover's costly statement moves and waits in heavy; $end ends that
# wait.  Returns the mover's (stdout, stderr) of that statement.
sub round
{
	my ($name, $mover, $mpid, $end) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is(sql($mover, 'BEGIN; SELECT held();'), 'web/auto', "$name: the mover's transaction holds web");
	send_q($waiter, 'BEGIN; SELECT held();');
	ok( poll_until(
			$node, qq{
			SELECT count(*) = 1 FROM bulkhead_activity a JOIN pg_stat_activity s USING (pid)
			 WHERE pid = $wpid AND a.workload = 'web' AND a.state = 'queued'
			   AND s.wait_event_type = 'Extension'}),
		"$name: the waiter queues for web");
	send_q($mover, 'SELECT costly(), held();');
	ok( poll_until(
			$node, qq{
			SELECT count(*) = 1 FROM bulkhead_activity a JOIN pg_stat_activity s USING (pid)
			 WHERE pid = $mpid AND a.workload = 'heavy' AND a.state = 'queued'
			   AND s.wait_event_type = 'Extension'}),
		"$name: the mover waits in heavy")
	  unless $name eq 'statement_timeout';
	$end->();
	my ($wout, $werr) = finish_q($waiter);
	is("$wout$werr", 'web/auto', "$name: the waiter was served web");
	return;
}

# --- 1. the move's wait cancelled ----------------------------------------------
my $mover = role_session('app');
my $mpid = sql($mover, 'SELECT pg_backend_pid()');
my ($out, $err);
round(
	'cancel', $mover, $mpid,
	sub {
		is(rows_of($mpid), 'heavy/queued/auto/web',
			'cancel: the mover holds nothing in web, waits in heavy, moved from web');
		is(rows_of($wpid), 'web/running/auto/-', 'cancel: web\'s waiter was served at once');
		$node->safe_psql('postgres', "SELECT pg_cancel_backend($mpid)");
		($out, $err) = finish_q($mover);
	});
like($err, qr/ERROR:\s+57014: canceling statement due to user request/,
	'cancel: the move fails with 57014');
is(rows_of($mpid), '', 'cancel: the mover holds nothing');
is(counts('heavy'), '1/0 cancelled 1 timed_out 0', 'cancel: counted cancelled in heavy');
is(counts('web'), '1/0 cancelled 0 timed_out 0', 'cancel: web holds the waiter\'s permit');
lanes_paired($node, 'cancel, before the transactions end', 'web', 'heavy', 'gweb', 'gheavy');
is(sql($waiter, 'COMMIT'), '', 'cancel: the waiter commits');
is(sql($mover, 'ROLLBACK; SELECT held()'), 'web/auto', 'cancel: the mover goes on after ROLLBACK');
lanes_paired($node, 'cancel', 'web', 'heavy', 'gweb', 'gheavy');

# --- 2. the move's wait hit by statement_timeout -------------------------------
sql($mover, "SET statement_timeout = '700ms'");
round(
	'statement_timeout', $mover, $mpid,
	sub {
		($out, $err) = finish_q($mover);
	});
like($err, qr/ERROR:\s+57014: canceling statement due to statement timeout/,
	'statement_timeout: the move fails with 57014');
is(rows_of($mpid), '', 'statement_timeout: the mover holds nothing');
is(counts('heavy'), '1/0 cancelled 2 timed_out 0', 'statement_timeout: counted cancelled in heavy');
is(sql($mover, 'ROLLBACK; RESET statement_timeout'), '', 'statement_timeout: ROLLBACK');
is(sql($waiter, 'COMMIT'), '', 'statement_timeout: the waiter commits');
lanes_paired($node, 'statement_timeout', 'web', 'heavy', 'gweb', 'gheavy');

# --- 3. a terminate during the move's wait --------------------------------------
round(
	'terminate', $mover, $mpid,
	sub {
		$node->safe_psql('postgres', "SELECT pg_terminate_backend($mpid)");
		ok( poll_until(
				$node, "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $mpid)"),
			'terminate: the mover is gone');
	});
close_session($mover);
is(rows_of($mpid), '', 'terminate: the mover holds nothing');
is(counts('heavy'), '1/0 cancelled 3 timed_out 0', 'terminate: counted cancelled in heavy');
is(sql($waiter, 'COMMIT'), '', 'terminate: the waiter commits');
lanes_paired($node, 'terminate', 'web', 'heavy', 'gweb', 'gheavy');

is(sql($holder, "SELECT bulkhead_release('heavy')"), '', 'the superuser releases heavy');
is(counts('heavy'), '0/0 cancelled 3 timed_out 0', 'heavy: nothing held or queued');
is(counts('web'), '0/0 cancelled 0 timed_out 0', 'web: nothing held or queued');
lanes_paired($node, 'after the faults', 'web', 'heavy', 'gweb', 'gheavy');

# --- 4. the guards around a move -----------------------------------------------
my $g = role_session('gapp');
is( sql($g, q{BEGIN; SELECT held(), current_setting('statement_timeout');}),
	'gweb/auto|500ms', 'guards: gweb\'s statement_timeout (500 ms) is in force');
my $t0 = time();
($out, $err) = sql2($g, q{SELECT costly(), held(), pg_sleep(3);});
my $took = time() - $t0;
like($err, qr/ERROR:\s+57014: canceling statement due to statement timeout/,
	'guards: a statement that moves to gheavy and sleeps 3 s is cancelled by a statement_timeout');
cmp_ok($took, '>=', 2.4,
	"guards: by gheavy's (2.5 s), armed for it at the move, not by gweb's (500 ms) (it took $took s)");
is(sql($g, 'ROLLBACK; SHOW statement_timeout'), '0', 'guards: none after the transaction');

# the wait in gheavy (more than gweb's 500 ms and, with the statement, more
# than gheavy's 2.5 s) is not counted against the statement
my $gholder = session($node);
is(sql($gholder, "SELECT bulkhead_acquire('gheavy')"), '', 'a superuser holds gheavy');
my $gpid = sql($g, 'SELECT pg_backend_pid()');
is(sql($g, 'BEGIN; SELECT held();'), 'gweb/auto', 'guards: a transaction in gweb');
send_q($g, 'SELECT costly(), held(), pg_sleep(1.5);');
ok( poll_until(
		$node, qq{
		SELECT count(*) = 1 FROM bulkhead_activity a JOIN pg_stat_activity s USING (pid)
		 WHERE pid = $gpid AND a.workload = 'gheavy' AND a.state = 'queued'
		   AND s.wait_event_type = 'Extension'}),
	'guards: the statement waits in gheavy');
ok( poll_until(
		$node, qq{
		SELECT wait_ms >= 1500 FROM bulkhead_activity WHERE pid = $gpid AND workload = 'gheavy'}),
	'guards: it has waited 1.5 s');
is(sql($gholder, "SELECT bulkhead_release('gheavy')"), '', 'the superuser releases gheavy');
($out, $err) = finish_q($g);
is($err, '', 'guards: the statement ran 1.5 s after its grant: gheavy\'s guard counts from the grant');
is($out, '1|gheavy/auto from gweb|', 'guards: in gheavy');
is(sql($g, 'SHOW statement_timeout'), '2500ms', 'guards: gheavy\'s guard is in force');
is(sql($g, 'COMMIT; SHOW statement_timeout'), '0', 'guards: none after the transaction');
lanes_paired($node, 'after the guards', 'web', 'heavy', 'gweb', 'gheavy');
is( $node->safe_psql('postgres',
		"SELECT sum(running + queued) FROM bulkhead_stats WHERE workload IN ('web', 'heavy', 'gweb', 'gheavy')"),
	'0', 'nothing is held or queued at the end');

close_session($_) for ($holder, $gholder, $waiter, $g);
$node->stop;
done_testing();
