# 002_cancel_race.pl: a queued waiter is cancelled while a release hands it
# the permit.  Whichever wins, the permit is never dropped nor duplicated,
# and a caller that sees the error holds nothing: either the waiter's
# statement completes and it holds the permit (the grant came first), or
# its statement fails with 57014 and the permit is passed on to the next
# waiter, also when the cancel lands after the grant within the acquiring
# statement (DESIGN.md, "Permits and failed statements").

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $rounds = 20;

my $node = bulkhead_node('cancel_race');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('r', 1, 4, '60s');
	});
wait_loaded($node, 'r', 1);

my $h = session($node);
my $wa = session($node);
my $wb = session($node);
my $hpid = sql($h, 'SELECT pg_backend_pid()');
my $apid = sql($wa, 'SELECT pg_backend_pid()');
my $bpid = sql($wb, 'SELECT pg_backend_pid()');

# stats and activity agree: running = running rows, queued = queued rows
my $consistent = q{
	SELECT s.running = (SELECT count(*) FROM bulkhead_activity
	                    WHERE workload = 'r' AND state = 'running')
	   AND s.queued = (SELECT count(*) FROM bulkhead_activity
	                   WHERE workload = 'r' AND state = 'queued')
	FROM bulkhead_stats s WHERE s.workload = 'r'};

# The race, in one statement of the holder so that both happen within
# microseconds; the order and a small pause vary from round to round.
my @pauses = (0, 0, 0.0001, 0.0005, 0.002);

my %outcome = (cancel_won => 0, grant_won => 0, late_cancel => 0);
my $cancelled_waits = 0;

for my $round (1 .. $rounds)
{
	my $xact = $round > $rounds / 2;    # second half: transaction scope
	my $pause = $pauses[ $round % @pauses ];
	my $cancel_first = $round % 2;
	my $tag = "round $round ("
	  . ($xact ? 'xact' : 'session') . ', '
	  . ($cancel_first ? 'cancel' : 'release')
	  . " first, pause ${pause}s)";

	is(sql($h, "SELECT bulkhead_acquire('r')"), '', "$tag: holder acquires");
	send_async($wa,
		$xact
		? "BEGIN; SELECT bulkhead_acquire_xact('r');"
		: "SELECT bulkhead_acquire('r');");
	poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $apid AND state = 'queued'"
	) or BAIL_OUT("$tag: A never queued");
	send_async($wb, "SELECT bulkhead_acquire('r');");
	poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $bpid AND state = 'queued'"
	) or BAIL_OUT("$tag: B never queued");

	my $cancel = "pg_cancel_backend($apid)";
	my $release = "bulkhead_release('r')";
	my @calls = $cancel_first ? ($cancel, $release) : ($release, $cancel);
	splice(@calls, 1, 0, "pg_sleep($pause)") if $pause > 0;
	my ($rout, $rerr) = sql2($h, 'SELECT ' . join(', ', @calls));
	is($rerr, '', "$tag: release and cancel issued");

	# A's statement ends either way (granted or cancelled)
	my ($aout, $aerr) = finish_async($wa);
	my $a_cancelled = $aerr =~ /canceling statement due to user request/;

	# Wait for one of the two valid end states: A runs and B waits, or
	# B runs (A cancelled, permit passed on).
	my $settled = poll_until(
		$node, qq{
		SELECT coalesce(string_agg(pid || ':' || state, ',' ORDER BY state DESC), '')
		       IN ('$apid:running,$bpid:queued', '$bpid:running')
		   AND (SELECT running = 1 FROM bulkhead_stats WHERE workload = 'r')
		FROM bulkhead_activity WHERE workload = 'r'},
		10);
	ok($settled, "$tag: exactly one of A and B holds the permit");
	my $state = activity_states($node, 'r');
	note "$tag: activity $state; A stderr: $aerr";
	ok(poll_until($node, $consistent, 5),
		"$tag: running and queued match bulkhead_activity");

	my $a_won = $state =~ /^$apid:running/;
	if ($a_won)
	{
		$outcome{ $a_cancelled ? 'late_cancel' : 'grant_won' }++;
		ok(!$a_cancelled,
			"$tag: A holds the permit only if its acquiring statement succeeded")
		  or diag "A stderr: $aerr";
		# A really holds it: its own release returns it
		if ($xact)
		{
			sql2($wa, 'COMMIT');
		}
		else
		{
			is(sql($wa, 'SELECT bulkhead_release_all()'),
				'1', "$tag: A holds the permit it won and releases it");
		}
	}
	else
	{
		$outcome{cancel_won}++;
		$cancelled_waits++;
		ok($a_cancelled, "$tag: A lost the permit only because it was cancelled")
		  or diag "A stdout: $aout\nA stderr: $aerr";
		sql2($wa, 'ROLLBACK') if $xact;
		is(sql($wa, 'SELECT bulkhead_release_all()'),
			'0', "$tag: the cancelled A holds nothing");
	}

	# B is served now in both cases, and releases
	ok( poll_until(
			$node,
			"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $bpid AND state = 'running'",
			10),
		"$tag: B gets the permit");
	my ($bout, $berr) = finish_async($wb);
	is($berr, '', "$tag: B's acquire succeeded");
	is(sql($wb, 'SELECT bulkhead_release_all()'), '1', "$tag: B releases");

	my $st = stats($node, 'r');
	is("$st->{running}/$st->{queued}", '0/0', "$tag: running = 0, queued = 0");
}

note sprintf('outcomes: cancel won %d, grant won %d, cancel after grant kept %d',
	$outcome{cancel_won}, $outcome{grant_won}, $outcome{late_cancel});
is($outcome{late_cancel}, 0,
	'no cancelled acquire left its caller holding the permit');
ok($outcome{cancel_won} > 0, 'the cancel won at least one race');
ok($outcome{grant_won} + $outcome{late_cancel} > 0,
	'the grant won at least one race');

my $st = stats($node, 'r');
is("$st->{running}/$st->{queued}", '0/0', 'at the end: running = 0, queued = 0');
is($st->{acquired}, $st->{released}, 'at the end: acquired = released');
# A transaction-scope A can also lose after its wait ended with a grant:
# the cancel lands before its statement ends, the abort returns the permit
# and B is served, yet A's wait counted as acquired (and released), not
# cancelled.  So every wait is counted once, as one or the other.
is($st->{acquired} + $st->{cancelled}, 3 * $rounds,
	'every wait (holder, A, B in each round) counted once, acquired or cancelled');
cmp_ok($st->{cancelled}, '<=', $cancelled_waits,
	'cancelled counts no more than the rounds that A lost');
is($st->{timed_out}, 0, 'no wait timed out');
is( $node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_activity'),
	'0', 'bulkhead_activity is empty');

close_session($_) for ($h, $wa, $wb);
$node->stop;
done_testing();
