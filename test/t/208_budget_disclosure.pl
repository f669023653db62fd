# 208_budget_disclosure.pl: what the errors about trees of budgets tell a
# role that may not read the workloads they would name.
#
# The table's trigger checks the trees on every row of bulkhead_workload,
# whoever wrote the statement: its 23514 (reservations over a budget's
# max_running, a cycle, a fifth level, a move_to naming a budget) and its
# 53400 (more rows than bulkhead.max_workloads) would name other rows and
# their figures.  As PostgreSQL does for the key values of a constraint's
# error, they are shown only to a role that may read them: not while
# row-level security applies to it, else with SELECT on the table or on
# every column shown.  Others get the same SQLSTATE with a message that
# names no other row.
#
# Acquiring a budget (42809) names its children in the hint: only to a role
# that may read bulkhead_stats (which shows them), and after the budget's
# roles were checked (a non-member gets 42501 and learns nothing).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('budget_disclosure');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'postgres'\n"
	  . "bulkhead.max_workloads = 12\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION bulkhead;
	-- (BYPASSRLS: not under the policies below, only its privileges count)
	CREATE ROLE writer BYPASSRLS;     -- INSERT and UPDATE, no SELECT
	CREATE ROLE colreader BYPASSRLS;  -- SELECT on the names only
	CREATE ROLE reader BYPASSRLS;     -- SELECT, INSERT, UPDATE
	CREATE ROLE tenant;               -- the same, under row-level security
	CREATE ROLE insiders;
	CREATE ROLE app;             -- takes permits
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('pool', 4), ('t1_pool', 2);
	INSERT INTO bulkhead_workload (name, max_running, parent, reserved) VALUES
	    ('hidden_a', 4, 'pool', 2), ('hidden_b', 4, 'pool', 1),
	    ('t1_child', 2, 't1_pool', 0), ('hidden_c', 2, 't1_pool', 0);
	INSERT INTO bulkhead_workload (name, max_running, roles) VALUES ('club', 2, '{insiders}');
	INSERT INTO bulkhead_workload (name, max_running, parent) VALUES ('club_member', 2, 'club');
	GRANT INSERT, UPDATE ON bulkhead_workload TO writer;
	GRANT SELECT (name), UPDATE (parent, reserved) ON bulkhead_workload TO colreader;
	GRANT SELECT, INSERT, UPDATE ON bulkhead_workload TO tenant, reader;
	ALTER TABLE bulkhead_workload ENABLE ROW LEVEL SECURITY;
	CREATE POLICY own_rows ON bulkhead_workload TO tenant
	    USING (name LIKE 't1\_%' OR name = 'pool');
});
ok(poll_until($node, "SELECT count(*) = 8 FROM bulkhead_stats"), 'the workloads are loaded');

# run $sql as $role; returns its error output (VERBOSITY verbose)
sub as_role
{
	my ($role, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSET ROLE $role;\n$sql");
	return $err;
}

# nothing of the hidden rows in $err: their names, their figures
sub tells_nothing
{
	my ($err, $code, $label) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	like($err, qr/ERROR:  $code/, "$label: $code");
	unlike($err, qr/hidden_|\(\d+\)|max_running is \d|add up to \d|path up|rows; shared/,
		"$label: no other workload's name or figures") or diag $err;
}

###########################################################################
# the trigger's errors
###########################################################################

# reservations over pool's max_running (4): hidden_a 2 + hidden_b 1 + 2
my $reserve = "INSERT INTO bulkhead_workload (name, max_running, parent, reserved)"
  . " VALUES ('w_new', 2, 'pool', 2);";
my $err = as_role('reader', $reserve);
like($err, qr/23514.*\n.*DETAIL:  Its children's reservations add up to 5: .*"hidden_a" \(2\)/,
	'a role that may read every row sees the children and their reservations');
tells_nothing(as_role('writer', $reserve), '23514', 'reservations, no SELECT');
tells_nothing(as_role('tenant', $reserve =~ s/w_new/t1_new/r), '23514',
	'reservations, under row-level security');

# a cycle through rows the role may not read: t1_pool under hidden_c
my $cycle = "UPDATE bulkhead_workload SET parent = 'hidden_c' WHERE name = 't1_pool';";
like(as_role('reader', $cycle), qr/23514.*\n.*DETAIL:  Its path up: /,
	'a cycle: a reader sees the path');
tells_nothing(as_role('colreader', $cycle), '23514', 'a cycle, SELECT on name only');

# five levels: hidden_c's subtree under three more levels
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, parent) VALUES ('hidden_d', 2, 'hidden_c');
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('t1_top', 2), ('t1_mid', 2);
	UPDATE bulkhead_workload SET parent = 't1_top' WHERE name = 't1_mid';
});
my $deep = "UPDATE bulkhead_workload SET parent = 't1_mid' WHERE name = 't1_pool';";
like(as_role('reader', $deep), qr/23514.*\n.*DETAIL:  Its path up: hidden_d -> /,
	'five levels: a reader sees the path');
tells_nothing(as_role('tenant', $deep), '23514', 'five levels, under row-level security');
tells_nothing(as_role('colreader', $deep), '23514', 'five levels, SELECT on name only');

# a move_to naming what becomes a budget: hidden_m moves to t1_top
$node->safe_psql('postgres', q{
	UPDATE bulkhead_workload SET parent = NULL WHERE name = 't1_mid';
	INSERT INTO bulkhead_workload (name, max_running, max_hold, on_max_hold, move_to)
	VALUES ('hidden_m', 1, '1s', 'move', 't1_top');
});
my $budget_to = "UPDATE bulkhead_workload SET parent = 't1_top' WHERE name = 't1_child';";
like(as_role('reader', $budget_to), qr/workload "hidden_m" cannot move permits to budget "t1_top"/,
	'move_to: a reader is told which workload moves there');
tells_nothing(as_role('tenant', $budget_to), '23514', 'move_to, under row-level security');

# too many rows: 12 slots, 12 rows now (bulkhead.max_workloads)
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_workload'), '12', '12 rows');
my $one_more = "INSERT INTO bulkhead_workload (name, max_running) VALUES ('t1_extra', 1);";
like(as_role('reader', $one_more), qr/53400.*\n.*DETAIL:  bulkhead_workload would hold 13 rows/,
	'too many rows: a reader is told how many');
tells_nothing(as_role('tenant', $one_more), '53400', 'too many rows, under row-level security');

###########################################################################
# acquiring a budget
###########################################################################
$node->safe_psql('postgres', 'GRANT insiders TO reader');
like(as_role('app', "SELECT bulkhead_acquire('pool');"),
	qr/42809.*\n.*\n.*HINT:  Acquire a permit of one of its children: .*"hidden_a"/,
	'acquiring a budget: a role that may read bulkhead_stats is told its children');
like(as_role('app', "SELECT bulkhead_acquire('club');"),
	qr/ERROR:  42501: permission denied for workload "club"/,
	'acquiring a budget with roles: a non-member gets 42501 first');
unlike(as_role('app', "SELECT bulkhead_acquire('club');"), qr/budget|club_member/,
	'acquiring a budget with roles: a non-member learns nothing of its children');
like(as_role('reader', "SELECT bulkhead_acquire('club');"), qr/42809.*(\n.*)*"club_member"/,
	'acquiring a budget with roles: a member is told its children');

$node->safe_psql('postgres', 'REVOKE SELECT ON bulkhead_stats FROM PUBLIC');
$err = as_role('app', "SELECT bulkhead_acquire('pool');");
tells_nothing($err, '42809', 'acquiring a budget, bulkhead_stats not readable');
like($err, qr/HINT:  Acquire a permit of one of its children\.$/m,
	'acquiring a budget, bulkhead_stats not readable: the hint names none');
$node->safe_psql('postgres', 'GRANT SELECT ON bulkhead_stats TO app');
like(as_role('app', "SELECT bulkhead_acquire('pool');"), qr/"hidden_a"/,
	'bulkhead_stats granted again: the children are named');
$node->safe_psql('postgres', 'REVOKE EXECUTE ON FUNCTION bulkhead_stats() FROM PUBLIC');
tells_nothing(as_role('app', "SELECT bulkhead_acquire('pool');"), '42809',
	'acquiring a budget, the function behind bulkhead_stats not executable');

# transparent admission to a budget, for a role that may not read the view
$node->safe_psql('postgres', q{
	CREATE ROLE gated LOGIN;
	ALTER ROLE gated SET bulkhead.workload = 'pool';
});
my ($ret, $out);
($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT 1;",
	extra_params => [ '-U', 'gated' ]);
tells_nothing($err, '42809', 'transparent admission to a budget');

$node->stop;
done_testing();
