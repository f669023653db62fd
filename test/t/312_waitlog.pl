# 312_waitlog.pl: the wait log (1.4).  With bulkhead.log_min_wait, a LOG
# line for each permit wait that lasted that long, whatever its end
# (granted, timed_out, cancelled, deadlock), none for a shorter one; with
# bulkhead.log_rejections, one for each 53B01 and 53B02 raised.  Every line
# has the documented key=value shape and ends with the statement.  The rate
# limit (bulkhead.log_max_rate): a flood of rejections writes at most its
# burst and its rate, and the suppressed lines are counted in
# event=suppressed lines, so that written + suppressed = rejections.  A
# wait for a memory grant writes event=memory_wait, outcome granted or
# shrunk (after memory_timeout).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# a rate that the lines before the flood never reach; the flood's is $RATE
my $RATE = 5;
my $node = bulkhead_node('waitlog', memory_request => 'limit',
	conf => "bulkhead.log_max_rate = 1000\n" . "deadlock_timeout = '100ms'\n");
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('w', 1, 4, '30s'), ('full', 0, 0, '0'), ('zero', 0, 1, '0'),
	       ('dl_a', 1, 1, '30s'), ('dl_b', 1, 1, '30s');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('mem', 4, 4, '30s', '2MB', '30s'), ('mem_short', 4, 4, '30s', '2MB', '200ms');
});
wait_loaded($node, 'mem_short', 4);
wait_loaded($node, 'w', 1);
wait_loaded($node, 'dl_b', 1);

# The wait log's lines since log offset $from: [event, fields hashref,
# statement], parsed by the documented grammar (a line that does not parse
# fails the test)
sub lines_since
{
	my ($from) = @_;
	my @out;
	for my $l (split /\n/, slurp_file($node->logfile, $from))
	{
		next unless $l =~ /LOG:  bulkhead: event=/;
		my ($rest) = $l =~ /LOG:  bulkhead: (event=.*)$/;
		my ($fields, $statement) = split / statement: /, $rest, 2;
		my %f;
		while ($fields =~ /\G\s*([a-z_0-9]+)=("(?:[^"\\]|\\.)*"|[A-Za-z0-9._:+-]+)/gc)
		{
			my ($k, $v) = ($1, $2);
			$v =~ s/^"(.*)"$/$1/s and $v =~ s/\\(.)/$1/g;
			$f{$k} = $v;
		}
		ok(pos($fields) // 0 == length($fields), "the line parses: $l")
		  or next;
		push @out, [ $f{event}, \%f, $statement ];
	}
	return @out;
}

# the lines of one event (and workload) since $from
sub events
{
	my ($from, $event, $workload) = @_;
	return grep { $_->[0] eq $event && (!defined $workload || $_->[1]{workload} eq $workload) }
	  lines_since($from);
}

# --- waits: each outcome, and a short wait under the threshold --------------
my ($holder) = verbose_session($node);
my ($waiter, $waiter_pid) = verbose_session($node);
sql($holder, "SELECT bulkhead_acquire('w')");
sql($waiter, 'SET bulkhead.log_min_wait = 0');

my $from = -s $node->logfile;
send_async($waiter, "SELECT bulkhead_acquire('w', '30s') AS granted_after_a_wait;");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'w' AND state = 'queued'"),
	'a waiter queues');
sql($holder, "SELECT bulkhead_release('w')");
my (undef, $err) = finish_async($waiter);
is($err, '', 'the waiter was granted');
sql($waiter, "SELECT bulkhead_release('w')");
my @l = events($from, 'wait', 'w');
is(scalar(@l), 1, 'one line for the wait');
is($l[0][1]{outcome}, 'granted', 'outcome=granted');
ok($l[0][1]{wait_ms} =~ /^\d+\.\d{3}$/ && $l[0][1]{wait_ms} >= 0, "wait_ms=$l[0][1]{wait_ms}");
is($l[0][1]{queryid}, '0', 'queryid=0 (no query identifiers computed)');
is($l[0][2], "SELECT bulkhead_acquire('w', '30s') AS granted_after_a_wait;", 'the statement ends the line');
ok(!exists $l[0][1]{sqlstate}, 'no sqlstate for a grant');

# timed out after its wait
sql($holder, "SELECT bulkhead_acquire('w')");
$from = -s $node->logfile;
like(sql($waiter, "SELECT bulkhead_acquire('w', '50ms')"), qr/53B02/, 'a wait times out');
@l = events($from, 'wait', 'w');
is(scalar(@l), 1, 'one line for it');
is(join(' ', map { $l[0][1]{$_} } qw(outcome sqlstate)), 'timed_out 53B02', 'outcome=timed_out sqlstate=53B02');
cmp_ok($l[0][1]{wait_ms}, '>=', 50, 'it waited its 50 ms at least');

# cancelled: statement_timeout (the abort clears debug_query_string: the
# statement comes from pg_stat_activity), then pg_cancel_backend
$from = -s $node->logfile;
like(sql($waiter, "SET statement_timeout = '100ms'; SELECT bulkhead_acquire('w', '30s') AS cancelled_by_timeout"),
	qr/57014/, 'a wait ended by statement_timeout');
sql($waiter, 'RESET statement_timeout');
send_async($waiter, "SELECT bulkhead_acquire('w', '30s') AS cancelled_by_user;");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'w' AND state = 'queued'"),
	'a waiter queues again');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($waiter_pid)");
(undef, $err) = finish_async($waiter);
like($err, qr/57014/, 'a wait cancelled');
@l = events($from, 'wait', 'w');
is(join(',', map { $_->[1]{outcome} } @l), 'cancelled,cancelled', 'two lines, outcome=cancelled');
like($l[0][2], qr/AS cancelled_by_timeout$/, 'the first names its statement');
like($l[1][2], qr/AS cancelled_by_user;$/, 'the second too');

# a wait shorter than log_min_wait: no line
sql($waiter, "SET bulkhead.log_min_wait = '1h'");
$from = -s $node->logfile;
send_async($waiter, "SELECT bulkhead_acquire('w', '30s');");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'w' AND state = 'queued'"),
	'a waiter queues once more');
sql($holder, "SELECT bulkhead_release('w')");
(undef, $err) = finish_async($waiter);
is($err, '', 'granted');
sql($waiter, "SELECT bulkhead_release('w')");
is(scalar(events($from, 'wait')), 0, 'a wait under log_min_wait writes nothing');

# a deadlock: each holds one workload and waits for the other's (transaction
# permits: the one that fails returns its permit at once, the other is served)
sql($_, 'SET bulkhead.log_min_wait = 0') for ($holder, $waiter);
sql($holder, "BEGIN; SELECT bulkhead_acquire_xact('dl_a')");
sql($waiter, "BEGIN; SELECT bulkhead_acquire_xact('dl_b')");
$from = -s $node->logfile;
send_async($holder, "SELECT bulkhead_acquire_xact('dl_b');");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'dl_b' AND state = 'queued'"),
	'the first waits for dl_b');
send_async($waiter, "SELECT bulkhead_acquire_xact('dl_a');");
my ($e1, $e2) = ((finish_async($holder))[1], (finish_async($waiter))[1]);
is(scalar(grep { /40P01/ } ($e1, $e2)), 1, 'one of them is the deadlock');
sql($_, 'ROLLBACK') for ($holder, $waiter);
@l = grep { $_->[1]{workload} =~ /^dl_/ } events($from, 'wait');
is(join(',', sort map { "$_->[1]{outcome}/" . ($_->[1]{sqlstate} // '-') } @l),
	'deadlock/40P01,granted/-', 'the deadlock is logged, and the other wait, granted');

# --- memory waits: granted after a wait, or shrunk after memory_timeout ------
# (work_mem 1MB: the statement requests 2 MB, its sort's and its function
# scan's; a cursor of the same statement holds the workload's 2 MB)
my $sorted = 'SELECT count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s';
for my $case (['mem', 'granted'], ['mem_short', 'shrunk'])
{
	my ($w, $outcome) = @$case;
	sql($_, "SET work_mem = '1MB'; BEGIN; SELECT bulkhead_acquire_xact('$w')") for ($holder, $waiter);
	sql($holder, "DECLARE c CURSOR FOR $sorted");
	$from = -s $node->logfile;
	if ($outcome eq 'granted')
	{
		send_async($waiter, "$sorted /* $outcome */;");
		ok(poll_until($node,
				"SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = '$w' AND state = 'waiting for memory'"),
			"$w: a statement waits for memory");
		sql($holder, 'CLOSE c');
		(undef, $err) = finish_async($waiter);
	}
	else
	{
		# (its wait, 200 ms, is too short to be seen reliably: its line says it)
		(undef, $err) = sql2($waiter, "$sorted /* $outcome */;");
	}
	is($err, '', "$w: it ran");
	sql($_, 'COMMIT') for ($holder, $waiter);
	@l = events($from, 'memory_wait', $w);
	is(scalar(@l), 1, "$w: one line for the memory wait");
	is($l[0][1]{outcome}, $outcome, "$w: outcome=$outcome");
	cmp_ok($l[0][1]{wait_ms}, '>=', $outcome eq 'shrunk' ? 200 : 0, "$w: wait_ms=$l[0][1]{wait_ms}");
	is($l[0][2], "$sorted /* $outcome */;", "$w: the statement ends the line");
}

# --- rejections ----------------------------------------------------------------
sql($waiter, 'SET bulkhead.log_min_wait = -1');
$from = -s $node->logfile;
like(sql($waiter, "SELECT bulkhead_acquire('full')"), qr/53B01/, '53B01 while log_rejections is off');
is(scalar(lines_since($from)), 0, 'no line');
sql($waiter, 'SET bulkhead.log_rejections = on');
like(sql($waiter, "SELECT bulkhead_acquire('full')"), qr/53B01/, '53B01');
like(sql($waiter, "SELECT bulkhead_acquire('zero')"), qr/53B02/, '53B02 (no wait allowed)');
is(sql($waiter, "SELECT bulkhead_try_acquire('full')"), 'f', "a try_ function's false");
@l = lines_since($from);
is(join(',', map { "$_->[0]/$_->[1]{workload}/$_->[1]{sqlstate}" } @l),
	'rejected/full/53B01,timed_out/zero/53B02', 'a line for each error raised, none for false');
is($l[0][2], "SELECT bulkhead_acquire('full')", 'with its statement');

# --- the rate limit -----------------------------------------------------------
# A flood of rejections in one statement: at most the burst plus the rate
# per second of it are written, the rest counted and reported.
my $N = 300;
$node->safe_psql('postgres', "ALTER SYSTEM SET bulkhead.log_max_rate = $RATE");
$node->reload;
ok(poll_until($node, "SELECT setting = '$RATE' FROM pg_settings WHERE name = 'bulkhead.log_max_rate'"),
	"log_max_rate is $RATE");
is(sql($waiter, 'SHOW bulkhead.log_max_rate'), $RATE, 'in the flooding session too');
$from = -s $node->logfile;
my $t0 = time();
sql($waiter, qq{DO \$\$ BEGIN
	FOR i IN 1..$N LOOP
		BEGIN PERFORM bulkhead_acquire('full'); EXCEPTION WHEN others THEN NULL; END;
	END LOOP; END \$\$});
my $elapsed = time() - $t0;
my ($written, $suppressed) = (0, 0);
for (1 .. 300)
{
	my @lines = lines_since($from);
	$written = grep { $_->[0] eq 'rejected' } @lines;
	$suppressed = 0;
	$suppressed += $_->[1]{lines} for grep { $_->[0] eq 'suppressed' } @lines;
	last if $written + $suppressed >= $N;
	select(undef, undef, undef, 0.1);
}
is($written + $suppressed, $N, "written ($written) + suppressed ($suppressed) = the $N rejections");
cmp_ok($written, '>=', 1, 'some lines are written');
cmp_ok($written, '<=', $RATE + $RATE * ($elapsed + 1),
	sprintf('at most the burst and the rate (%d lines in %.2f s)', $written, $elapsed));
my @sup = events($from, 'suppressed');
ok(@sup >= 1 && $sup[0][1]{log_max_rate} eq $RATE && $sup[0][1]{seconds} =~ /^\d+\.\d$/,
	'event=suppressed lines=N seconds=S log_max_rate=R');

close_session($_) for ($holder, $waiter);
$node->stop;
done_testing();
