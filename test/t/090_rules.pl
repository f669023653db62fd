# 090_rules.pl: classification rules end to end.  Three programs log in as
# one role with different application_names, and a fourth connects over TCP
# from 127.0.0.2 (through a relay that binds its side to that address:
# Linux would pick 127.0.0.1 as the source of a connection to 127.0.0.2):
# each is gated by its own workload.  SET application_name
# reclassifies at the next transaction; a rule change reaches running
# sessions within 2 s; bulkhead.workload set on a role wins over the rules;
# superusers are exempt; a rule naming a workload whose roles exclude the
# session fails its transactions with 42501; a standby follows the
# primary's rules.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IO::Select;
use IO::Socket::INET;
use POSIX ();

my $primary = bulkhead_node('rules', allows_streaming => 1);
# TCP on two loopback addresses, trusted from 127.0.0.0/8
$primary->append_conf('postgresql.conf',
	"listen_addresses = '127.0.0.1,127.0.0.2'\n");
$primary->append_conf('pg_hba.conf', "host all all 127.0.0.0/8 trust\n");
$primary->restart;

$primary->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE direct_app LOGIN;
	CREATE ROLE nobody;
	ALTER ROLE direct_app SET bulkhead.workload = 'direct';
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, roles)
	VALUES ('web', 4, 0, '0', NULL), ('jobs', 4, 0, '0', NULL),
	       ('reports', 4, 0, '0', NULL), ('remote', 4, 0, '0', NULL),
	       ('direct', 4, 0, '0', NULL), ('locked', 4, 0, '0', '{nobody}');
	INSERT INTO bulkhead_rule (position, client_addr, workload)
	VALUES (5, '127.0.0.2/32', 'remote');
	INSERT INTO bulkhead_rule (position, application_name, workload)
	VALUES (10, 'web%', 'web'), (20, 'jobs%', 'jobs'),
	       (30, 'reports%', 'reports'), (40, 'locked%', 'locked');
	CREATE VIEW held AS
	    SELECT s.application_name || ':' || a.workload || ':' || a.scope AS h
	      FROM bulkhead_activity a JOIN pg_stat_activity s USING (pid);
});
wait_loaded($primary, $_, 4) for qw(web jobs reports remote direct locked);

# A TCP relay: listens on 127.0.0.1 (a free port, returned with its pid)
# and connects every client it accepts to 127.0.0.1:$to_port from
# $from_addr, copying bytes both ways.  Its processes leave with
# POSIX::_exit, also on SIGTERM, so that no END block of the test (which
# stops the nodes) runs in them.
sub start_relay
{
	my ($to_port, $from_addr) = @_;
	my $listen = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => 0,
		Listen => 8,
		ReuseAddr => 1) or die "relay: listen: $!";
	my $port = $listen->sockport;
	my $pid = fork() // die "relay: fork: $!";
	if ($pid == 0)
	{
		# no die() handler of the test's (PostgreSQL 18's Cluster.pm has
		# one for TERM) may run here
		$SIG{TERM} = $SIG{INT} = sub { POSIX::_exit(0) };
		local $SIG{CHLD} = 'IGNORE';
		while (my $client = $listen->accept)
		{
			my $child = fork();
			if (defined $child && $child == 0)
			{
				my $server = IO::Socket::INET->new(
					PeerAddr => '127.0.0.1',
					PeerPort => $to_port,
					LocalAddr => $from_addr) or POSIX::_exit(1);
				my $select = IO::Select->new($client, $server);
			  PUMP: while (1)
				{
					for my $from ($select->can_read)
					{
						my $to = $from == $client ? $server : $client;
						my $n = sysread($from, my $buf, 65536);
						last PUMP unless $n;
						while (length $buf)
						{
							my $w = syswrite($to, $buf) or last PUMP;
							substr($buf, 0, $w) = '';
						}
					}
				}
				POSIX::_exit(0);
			}
			close $client;
		}
		POSIX::_exit(0);
	}
	close $listen;
	return ($pid, $port);
}

# A session as $user with application_name $app (PGAPPNAME), through the
# Unix socket or, with $port, over TCP to 127.0.0.1:$port.
sub app_session
{
	my ($node, $user, $app, $port) = @_;
	local %ENV = %ENV;
	local $node->{_host} = defined $port ? '127.0.0.1' : $node->{_host};
	local $node->{_port} = $port // $node->{_port};
	$ENV{PGUSER} = $user if defined $user;
	$ENV{PGAPPNAME} = $app;
	return session($node);
}

# what every session holds now, as "application:workload:scope"
sub held
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(h, ',' ORDER BY h), '') FROM held");
}

# --- three programs as one role, and one over TCP -------------------------
my $web = app_session($primary, 'app', 'web-1');
my $jobs = app_session($primary, 'app', 'jobs-1');
my $reports = app_session($primary, 'app', 'reports-1');
my ($relay_pid, $relay_port) = start_relay($primary->port, '127.0.0.2');
my $remote = app_session($primary, 'app', 'web-remote', $relay_port);

is(sql($remote, 'SELECT inet_client_addr()'), '127.0.0.2',
	'the TCP session comes from 127.0.0.2');
is(sql($web, 'SELECT inet_client_addr() IS NULL'), 't',
	'the others come through the Unix socket');

sql($_, 'BEGIN; SELECT 1;') for ($web, $jobs, $reports, $remote);
is(held($primary),
	'jobs-1:jobs:auto,reports-1:reports:auto,web-1:web:auto,web-remote:remote:auto',
	'each program holds a permit of its own workload, scope auto');
is(sql($remote, 'SELECT * FROM bulkhead_classify()'), 'remote|rule|5',
	'the address rule comes first for the TCP session');
sql($_, 'COMMIT;') for ($web, $jobs, $reports, $remote);
is(held($primary), '', 'all returned at commit');
is( $primary->safe_psql('postgres', q{
		SELECT string_agg(workload || '=' || acquired || '/' || running,
		                  ',' ORDER BY workload) FROM bulkhead_stats}),
	'direct=0/0,jobs=1/0,locked=0/0,remote=2/0,reports=1/0,web=2/0',
	'bulkhead_stats counts each program in its own workload');

# --- SET application_name mid-session --------------------------------------
sql($web, "SET application_name = 'jobs-2'");
sql($web, 'BEGIN; SELECT 1;');
is(held($primary), 'jobs-2:jobs:auto',
	'SET application_name reclassifies at the next transaction');
sql($web, 'COMMIT;');
sql($web, "SET application_name = 'web-1'");

# --- a rule change reaches running sessions within 2 s --------------------
# the sessions have run transactions and cached their classification
my $t0 = time();
$primary->safe_psql('postgres',
	"UPDATE bulkhead_rule SET workload = 'reports' WHERE position = 20");
my $seen = '';
while (time() - $t0 < 5)
{
	$seen = sql($jobs,
		'BEGIN; SELECT workload FROM bulkhead_activity WHERE pid = pg_backend_pid(); COMMIT;');
	last if $seen eq 'reports';
	usleep(20_000);
}
my $elapsed = time() - $t0;
is($seen, 'reports', 'the running jobs session moves to the new workload');
ok($elapsed < 2, sprintf('within 2 s (%.3f s)', $elapsed));
$primary->safe_psql('postgres',
	"UPDATE bulkhead_rule SET workload = 'jobs' WHERE position = 20");
ok( poll_until(
		$primary,
		"SET ROLE app; SET application_name = 'jobs-x';"
		  . " SELECT workload = 'jobs' FROM bulkhead_classify()"),
	'and back');

# --- bulkhead.workload set on the role wins ------------------------------
my $direct = app_session($primary, 'direct_app', 'web-direct');
is(sql($direct, 'SELECT * FROM bulkhead_classify()'), 'direct|setting|',
	'bulkhead.workload set on the role wins over the application rule');
sql($direct, 'BEGIN; SELECT 1;');
is(held($primary), 'web-direct:direct:auto', 'and gates the transaction');
sql($direct, 'COMMIT;');

# --- superusers are exempt -------------------------------------------------
my $su = app_session($primary, undef, 'web-su');    # the bootstrap superuser
is(sql($su, 'SELECT * FROM bulkhead_classify()'), '|superuser|',
	'a superuser matching a rule is exempt');
sql($su, 'BEGIN; SELECT 1;');
is(held($primary), '', 'and takes no permit');
sql($su, 'COMMIT;');
my $webpid = sql($web, 'SELECT pg_backend_pid()');
is(sql($su, "SELECT * FROM bulkhead_classify($webpid)"), 'web|rule|10',
	'a superuser sees what another backend published');

# --- a rule naming a workload whose roles exclude the session: 42501 -------
my $locked = app_session($primary, 'app', 'locked-1');
sql($locked, '\set VERBOSITY sqlstate');
my ($out, $err) = sql2($locked, 'SELECT 1');
like($err, qr/ERROR:\s+42501/, 'a transaction sent to a workload it may not use fails with 42501');
is($primary->safe_psql('postgres',
		"SELECT acquired FROM bulkhead_stats WHERE workload = 'locked'"),
	'0', 'and takes nothing');

# --- a standby follows the primary's rules -------------------------------
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('rules_standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', "listen_addresses = ''\n");
$standby->start;
my $standby_web = app_session($standby, 'app', 'web-standby');
ok( poll_until($standby,
		"SET ROLE app; SET application_name = 'web-standby';"
		  . " SELECT workload = 'web' FROM bulkhead_classify()"),
	'the standby loaded the rules');
sql($standby_web, 'BEGIN; SELECT 1;');
is(held($standby), 'web-standby:web:auto', 'a standby session is gated by a rule');
sql($standby_web, 'COMMIT;');

$primary->safe_psql('postgres',
	"INSERT INTO bulkhead_rule (position, application_name, workload) VALUES (1, 'web-standby', 'reports')");
$t0 = time();
ok( poll_until($standby,
		"SET ROLE app; SET application_name = 'web-standby';"
		  . " SELECT workload = 'reports' FROM bulkhead_classify()"),
	'a rule added on the primary reaches the standby');
note sprintf('standby followed in %.2f s', time() - $t0);
$seen = '';
for (1 .. 50)
{
	$seen = sql($standby_web,
		'BEGIN; SELECT workload FROM bulkhead_activity WHERE pid = pg_backend_pid(); COMMIT;');
	last if $seen eq 'reports';
	usleep(50_000);
}
is($seen, 'reports', 'and the running standby session follows it');

close_session($_) for ($web, $jobs, $reports, $remote, $direct, $su, $locked, $standby_web);
kill 'TERM', $relay_pid;
waitpid($relay_pid, 0);
$standby->stop;
$primary->stop;
done_testing();
