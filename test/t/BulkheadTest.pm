# BulkheadTest.pm: shared helpers of bulkhead's TAP tests (test/t/*.pl).
#
# Every helper is bounded in time: a wait that does not end dies or fails
# the test instead of hanging the suite.

package BulkheadTest;

use strict;
use warnings;

use Digest::MD5 qw(md5_hex);
use Exporter 'import';
use Fcntl qw(:flock);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

our @EXPORT = qw(
  bulkhead_node wait_loaded wait_classified session verbose_session send_async finish_async sql sql2
  close_session poll_until stats activity_states waiting_backends
  worker_pid all_counts queue_recorders grant_order finish_recorders
  budget_violations levels_hold lanes_paired lane_functions
  gdb_path gdb_break gdb_hit gdb_go
);

# Every node these tests make is UTF8 with the C locale, whatever the
# caller's environment (initdb would otherwise take the encoding from the
# locale: SQL_ASCII under LC_ALL=C).  Wrapping init() here covers the nodes
# that the tests make themselves as well as bulkhead_node's.
{
	no warnings 'redefine';
	my $init = \&PostgreSQL::Test::Cluster::init;
	*PostgreSQL::Test::Cluster::init = sub {
		my ($self, %params) = @_;
		$params{extra} =
		  [ '--encoding=UTF8', '--locale=C', @{ $params{extra} // [] } ];
		return $init->($self, %params);
	};
}

# initdb once per set of options for the whole run: the first node made
# with them runs initdb into a template directory under tmp_check (shared
# by the test files that prove runs side by side, hence the lock), and every
# node copies that template, as PostgreSQL's own tests do with
# INITDB_TEMPLATE (PostgreSQL 17 and later, and only without extra options:
# ours always have some).  A copy takes a tenth of initdb's time, and a run
# makes some 40 nodes.  Cluster::init calls initdb through
# PostgreSQL::Test::Utils::system_or_bail('initdb', ..., '-D' (or, from
# PostgreSQL 18, '--pgdata'), $pgdata, ...).
{
	no warnings 'redefine';
	my $system_or_bail = \&PostgreSQL::Test::Utils::system_or_bail;
	*PostgreSQL::Test::Utils::system_or_bail = sub {
		my @cmd = @_;
		my ($d) = grep { $cmd[$_] =~ /^(?:-D|--pgdata)$/ } 0 .. $#cmd;
		return $system_or_bail->(@cmd)
		  unless $cmd[0] eq 'initdb' && defined $d && $d < $#cmd;
		my $pgdata = $cmd[ $d + 1 ];
		my @opts = @cmd[ 1 .. $d - 1, $d + 2 .. $#cmd ];
		my $template = "$PostgreSQL::Test::Utils::tmp_check/initdb_template_"
		  . md5_hex(join("\0", @opts));
		open(my $lock, '>', "$template.lock") or die "$template.lock: $!";
		flock($lock, LOCK_EX) or die "lock $template.lock: $!";
		if (!-d $template)
		{
			$system_or_bail->('initdb', $cmd[$d], "$template.new", @opts);
			rename("$template.new", $template)
			  or die "rename $template.new: $!";
		}
		close($lock);
		note("initializing database system by copying initdb template $template");
		return $system_or_bail->('cp', '-RPp', $template, $pgdata);
	};
}

# Seconds a background session may spend on one query before it dies.
my $session_timeout = 60;

# A started node with bulkhead preloaded and the extension created in
# database postgres.  conf => lines appended to postgresql.conf;
# memory_request => 'limit' makes memory nodes request their limits (as 1.4
# did: the tests of the grants' waits, shrinking and counting ask known
# amounts); the other %opts go to init() (e.g. allows_streaming => 1).
sub bulkhead_node
{
	my ($name, %opts) = @_;
	my $conf = delete $opts{conf} // '';
	my $request = delete $opts{memory_request};
	$conf .= "bulkhead.memory_request = '$request'\n" if defined $request;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%opts);
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'bulkhead'\n"
		  . "bulkhead.database = 'postgres'\n"
		  . "log_line_prefix = '%m [%p] %b '\n"
		  . $conf);
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION bulkhead');
	return $node;
}

# The lanes' tests' functions, in database postgres: costly() (a plan that
# calls it costs 250000 and runs at once), caps() (the settings a lane may
# cap, in one line: work_mem hash_mem_multiplier maintenance_work_mem
# temp_file_limit max_parallel_workers_per_gather
# max_parallel_maintenance_workers jit) and held() (this backend's permits,
# as workload/scope[ from moved_from], or 'nothing').
sub lane_functions
{
	my ($node) = @_;
	$node->safe_psql('postgres', q{
	CREATE FUNCTION costly() RETURNS int LANGUAGE plpgsql COST 100000000
	AS $$ BEGIN RETURN 1; END $$;
	CREATE FUNCTION caps() RETURNS text LANGUAGE sql STABLE AS $$
		SELECT concat_ws(' ', current_setting('work_mem'), current_setting('hash_mem_multiplier'),
		                 current_setting('maintenance_work_mem'), current_setting('temp_file_limit'),
		                 current_setting('max_parallel_workers_per_gather'),
		                 current_setting('max_parallel_maintenance_workers'), current_setting('jit'))
	$$;
	CREATE FUNCTION held() RETURNS text LANGUAGE sql AS $$
		SELECT coalesce(string_agg(workload || '/' || scope || coalesce(' from ' || moved_from, ''),
		                           ', ' ORDER BY workload), 'nothing')
		  FROM bulkhead_activity WHERE pid = pg_backend_pid()
	$$;
});
}

# Wait (bounded) until the worker shows workload $w with max_running $b.
sub wait_loaded
{
	my ($node, $w, $b) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok( poll_until(
			$node,
			"SELECT count(*) = 1 FROM bulkhead_stats"
			  . " WHERE workload = '$w' AND max_running = $b",
			30),
		"workload $w loaded with max_running = $b")
	  or die "workload $w was not loaded";
}

# A session with verbose error messages (SQLSTATEs shown), and its pid
sub verbose_session
{
	my ($node) = @_;
	my $s = session($node);
	sql($s, '\\set VERBOSITY verbose');
	my $pid = sql($s, 'SELECT pg_backend_pid()');
	return ($s, $pid);
}

# Wait until a session of role $role is classified into $workload by the
# rules: the worker defines a load's workloads before it replaces the rules
# (wait_loaded sees the first, not the second).
sub wait_classified
{
	my ($node, $role, $w) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok( poll_until(
			$node,
			"SET ROLE $role; SELECT workload = '$w' FROM bulkhead_classify()",
			30),
		"the rules send role $role to $w")
	  or die "the rules were not loaded";
}

# Poll $query on $node (database postgres) until it returns 't', for at
# most $timeout seconds.  Returns true on success.
sub poll_until
{
	my ($node, $query, $timeout) = @_;
	$timeout //= 30;
	my $deadline = time() + $timeout;
	my $last = '';
	while (time() < $deadline)
	{
		my ($ret, $out, $err);
		# psql may exit before it has read the query (the server refused
		# the connection, say while it restarts after a crash): IPC::Run
		# then dies of the broken pipe.  That is one more try that failed.
		if (!eval {
				($ret, $out, $err) =
				  $node->psql('postgres', $query, timeout => $timeout);
				1;
			})
		{
			$last = "psql failed: $@";
			usleep(50_000);
			next;
		}
		$last = "$out / $err";
		return 1 if $ret == 0 && $out eq 't';
		usleep(50_000);
	}
	diag "poll_until timed out after ${timeout}s: $query\nlast: $last";
	return 0;
}

# A background psql session on database $db (default postgres), as role
# $role (default the node's user), that keeps going after an error (so a
# cancelled statement can be observed).
sub session
{
	my ($node, $db, $role) = @_;
	my $s = $node->background_psql(
		$db // 'postgres',
		on_error_stop => 0,
		timeout => $session_timeout,
		defined $role ? (extra_params => [ '-U', $role ]) : ());
	$s->set_query_timer_restart();
	return $s;
}

# Run $query in session $s and wait for it.  Returns its stdout; if it
# wrote to stderr (an error), that is appended after "STDERR: " so that a
# comparison with the expected output fails visibly.
sub sql
{
	my ($s, $query) = @_;
	my ($out, $err) = sql2($s, $query);
	$out .= "\nSTDERR: $err" if $err ne '';
	return $out;
}

# Same, but returns (stdout, stderr) as a list.  Clears the session's stderr
# (BackgroundPsql keeps it otherwise).
sub sql2
{
	my ($s, $query) = @_;
	my $out;
	# a session whose backend was ended (by a test or by a bug) makes psql
	# exit: report that as an error instead of dying
	if (!eval { $out = $s->query($query); 1 })
	{
		my $err = "$s->{stderr}\nbackground psql failed: $@";
		$s->{stderr} = '';
		return ('', $err);
	}
	my $err = $s->{stderr};
	$s->{stderr} = '';
	return ($out, $err);
}

# Start $query in session $s without waiting for its result (it may block
# in bulkhead_acquire).  Returns once psql has sent it to the server.
sub send_async
{
	my ($s, $query) = @_;
	$s->query_until(qr/async-sent\n/, "\\echo async-sent\n$query\n");
	return;
}

# Wait for what send_async started (and anything after it) to finish.
# Returns (stdout, stderr) of it, as sql2().
sub finish_async
{
	my ($s) = @_;
	my ($out, $err) = sql2($s, "SELECT 'async-done'");
	$out =~ s/\n?async-done$//;
	return ($out, $err);
}

# Close a session, whether its backend is alive or was terminated.
sub close_session
{
	my ($s) = @_;
	eval {
		$s->{run}->pump_nb();
		if ($s->{run}->pumpable())
		{
			$s->quit;
		}
		else
		{
			$s->{run}->finish;
		}
	};
	eval { $s->{run}->kill_kill if $s->{run}->pumpable(); };
	return;
}

# Lanes (1.3): in each of @workloads, acquired + moved_in = released +
# moved_out + running, and running is the number of permits held there
# (rows of bulkhead_activity).
sub lanes_paired
{
	my ($node, $what, @workloads) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $list = join(', ', map { "'$_'" } @workloads);
	is( $node->safe_psql(
			'postgres', qq{
			SELECT string_agg(workload, ',' ORDER BY workload) FROM bulkhead_stats s
			 WHERE workload IN ($list)
			   AND (acquired + moved_in <> released + moved_out + running
			        OR running <> (SELECT count(*) FROM bulkhead_activity a
			                        WHERE a.workload = s.workload AND a.state = 'running'))}),
		'',
		"$what: every lane's figures pair up, running = the permits held");
	return;
}

# bulkhead_stats of workload $w as a hashref (undef if absent).
sub stats
{
	my ($node, $w) = @_;
	my @cols =
	  qw(max_running max_queued running queued acquired rejected_full
	  timed_out cancelled released);
	my $out = $node->safe_psql('postgres',
		    'SELECT '
		  . join(', ', @cols)
		  . " FROM bulkhead_stats WHERE workload = '$w'");
	return undef if $out eq '';
	my @vals = split /\|/, $out;
	my %h;
	@h{@cols} = @vals;
	return \%h;
}

# "pid:state,pid:state,..." of workload $w in bulkhead_activity, ordered by
# state (running first) and then by arrival.
sub activity_states
{
	my ($node, $w) = @_;
	return $node->safe_psql(
		'postgres', qq{
		SELECT coalesce(string_agg(pid || ':' || state, ','
		         ORDER BY state DESC, since, pid), '')
		FROM bulkhead_activity WHERE workload = '$w'});
}

# Client backends waiting with wait_event_type Extension (bulkhead waiters;
# the bulkhead worker itself also waits so, hence the backend_type filter).
sub waiting_backends
{
	my ($node) = @_;
	return $node->safe_psql(
		'postgres', q{
		SELECT count(*) FROM pg_stat_activity
		WHERE wait_event_type = 'Extension'
		  AND backend_type = 'client backend'});
}

# pid of the bulkhead background worker, or '' when none runs.
sub worker_pid
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(pid::text, ','), '') FROM pg_stat_activity WHERE backend_type = 'bulkhead'"
	);
}

# "w:running/queued/acquired/released/cancelled,..." of every workload in
# bulkhead_stats, by name.
sub all_counts
{
	my ($node) = @_;
	return $node->safe_psql(
		'postgres', q{
		SELECT string_agg(workload || ':' || running || '/' || queued || '/'
		                  || acquired || '/' || released || '/' || cancelled,
		                  ',' ORDER BY workload)
		FROM bulkhead_stats});
}

# Queue callers one after the other, each queued and asleep on its latch
# before the next (behind those already queued): one session per
# [workload, name] or [workload, name, key] (a tenant), which takes a
# permit of the workload, records its name in table grants (id serial, who
# text), holds the permit a moment and releases it.  Returns the sessions.
sub queue_recorders
{
	my ($node, @pairs) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my @sessions;
	my $n = $node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_activity WHERE state = 'queued'");
	for my $pair (@pairs)
	{
		my ($w, $name, $key) = @$pair;
		my $s = session($node);
		my $args = defined $key ? "'$w', NULL, '$key'" : "'$w'";
		push @sessions, $s;
		$n++;
		send_async($s,
			    "SELECT bulkhead_acquire($args);"
			  . " INSERT INTO grants (who) VALUES ('$name');"
			  . " SELECT pg_sleep(0.05);"
			  . " SELECT bulkhead_release('$w');");
		ok( poll_until(
				$node,
				"SELECT count(*) = $n FROM bulkhead_activity a JOIN pg_stat_activity p USING (pid)"
				  . " WHERE a.state = 'queued' AND p.wait_event_type = 'Extension'"),
			"$name is queued for $w");
	}
	return @sessions;
}

# Once $n grants are recorded in table grants: their names in the order
# granted, comma-separated; the table is emptied for the next round.
sub grant_order
{
	my ($node, $n) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok(poll_until($node, "SELECT count(*) = $n FROM grants", 30), "$n grants made");
	my $order = $node->safe_psql('postgres', "SELECT string_agg(who, ',' ORDER BY id) FROM grants");
	$node->safe_psql('postgres', 'TRUNCATE grants');
	return $order;
}

# The sessions of queue_recorders: each acquired and released, then closed
sub finish_recorders
{
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	for my $s (@_)
	{
		my (undef, $err) = finish_async($s);
		is($err, '', 'a waiter acquired and released without error');
		close_session($s);
	}
}

# What breaks the counts of the trees of budgets, at a quiescent moment (no
# acquire, release or load under way), as one string ('' when nothing):
# for every workload of bulkhead_stats (leaf or budget), running must be
# the permits really held in its subtree (the running rows of
# bulkhead_activity), within its limit in force (enforce mode), and its
# counters must pair up: acquired + moved_in = released + moved_out +
# running.  Every permit held must count in some workload.  %drain names
# workloads deleted or renamed while they still hold or await permits
# (bulkhead_activity shows them under their old names; bulkhead_stats has
# no row for them) => the budget they still count in ('' for none).
sub budget_violations
{
	my ($node, %drain) = @_;
	my $extra = join(
		'',
		map {
			my $p = $drain{$_} eq '' ? 'NULL' : "'$drain{$_}'";
			" UNION ALL SELECT '$_'::text, ${p}::text"
		} sort keys %drain);
	return $node->safe_psql(
		'postgres', qq{
		WITH RECURSIVE tree(workload, parent) AS (
		    SELECT workload, parent FROM bulkhead_stats$extra
		), sub(top, w) AS (
		    SELECT workload, workload FROM tree
		    UNION ALL
		    SELECT sub.top, tree.workload FROM sub JOIN tree ON tree.parent = sub.w
		), act AS MATERIALIZED (
		    SELECT workload FROM bulkhead_activity WHERE state = 'running'
		), held AS (
		    SELECT top, count(act.workload) AS n
		      FROM sub LEFT JOIN act ON act.workload = sub.w GROUP BY top
		), st AS MATERIALIZED (
		    SELECT * FROM bulkhead_stats
		)
		SELECT coalesce(string_agg(v, '; ' ORDER BY v), '') FROM (
		    SELECT st.workload || ': running ' || st.running || ', held ' || held.n AS v
		      FROM st JOIN held ON held.top = st.workload WHERE st.running <> held.n
		    UNION ALL
		    SELECT workload || ': running ' || running || ' over its limit ' || current_limit
		      FROM st WHERE mode = 'enforce' AND running > current_limit
		    UNION ALL
		    SELECT workload || ': acquired ' || acquired || ' + moved_in ' || moved_in
		           || ' <> released ' || released || ' + moved_out ' || moved_out
		           || ' + running ' || running
		      FROM st WHERE acquired + moved_in <> released + moved_out + running
		    UNION ALL
		    SELECT 'a permit of ' || workload || ' counts nowhere'
		      FROM act WHERE workload NOT IN (SELECT workload FROM tree)
		) x});
}

# Test that budget_violations finds nothing, polling for a while: a waiter
# that was handed a permit counts it in its workload's acquired once it
# runs again.  $label names the moment.
sub levels_hold
{
	my ($node, $label, %drain) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $v;
	for (1 .. 100)
	{
		$v = budget_violations($node, %drain);
		last if $v eq '';
		usleep(50_000);
	}
	return is($v, '', "$label: every level counts what is held, within its limit, counters paired");
}

# --- gdb: hold a process at a breakpoint, then let it go ------------------
# A test that needs gdb skips itself without it:
#   plan skip_all => 'gdb is not installed' if gdb_path() eq '';

# gdb's path, '' without it
sub gdb_path
{
	my $gdb = `command -v gdb 2>/dev/null`;
	chomp $gdb;
	return $gdb;
}

# Attach gdb to $pid with a breakpoint at $where (gdb's syntax, a condition
# allowed); it stops there, the first time, until gdb_go.  Passes a test
# once the breakpoint is set.  Returns the handle for gdb_hit and gdb_go.
sub gdb_break
{
	my ($node, $pid, $where, $name) = @_;
	my $b = {
		pid => $pid,
		go => $node->basedir . '/gdb_go_' . $pid . '_' . int(time() * 1000),
		out => '',
		err => '',
		deadline => time() + 60
	};
	$b->{run} = IPC::Run::start(
		[
			gdb_path(), '-p', $pid, '-batch',
			'-ex', "break $where",
			'-ex', 'continue',
			'-ex', "shell while [ ! -f $b->{go} ]; do sleep 0.1; done",
			'-ex', 'detach'
		],
		'>', \$b->{out}, '2>', \$b->{err});
	while ($b->{out} !~ /Breakpoint 1 at/ && time() < $b->{deadline})
	{
		$b->{run}->pump_nb;
		usleep(100_000);
	}
	ok($b->{out} =~ /Breakpoint 1 at/, "gdb holds a breakpoint in $name")
	  or diag "$b->{out}\n$b->{err}";
	usleep(500_000);    # (gdb's continue)
	return $b;
}

# Has the process stopped at the breakpoint?  A test named $test_name.  If
# not (in 60 s from gdb_break), gdb is killed and the process continued:
# the caller ends its test there.
sub gdb_hit
{
	my ($b, $test_name) = @_;
	while ($b->{out} !~ /Breakpoint 1,/ && time() < $b->{deadline})
	{
		$b->{run}->pump_nb;
		usleep(100_000);
	}
	return 1 if ok($b->{out} =~ /Breakpoint 1,/, $test_name);
	# (gdb would wait for ever in its continue: it goes, and so does the test)
	diag "$b->{out}\n$b->{err}";
	$b->{run}->kill_kill;
	kill 'CONT', $b->{pid};
	return 0;
}

# Let the process go on, gdb detached
sub gdb_go
{
	my ($b) = @_;
	append_to_file($b->{go}, 'go');
	$b->{run}->finish;
	return;
}

1;
