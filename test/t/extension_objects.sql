-- extension_objects.sql: every object of the installed bulkhead extension,
-- one line each, in a canonical order, for 080_upgrade.pl to compare an
-- updated install with a fresh one.  It is written from the catalogs, not
-- from a list of what bulkhead should have, so that whatever a version adds
-- is compared too: member objects; columns (in order, with type, NOT NULL
-- and default) of member tables and views; constraints; indexes; triggers;
-- function definitions (signature, body, volatility, parallel safety);
-- views' queries; privileges; comments; and what pg_dump dumps of the
-- configuration tables.
WITH ext AS (
    SELECT oid, extconfig, extcondition FROM pg_extension WHERE extname = 'bulkhead'
), member AS (
    SELECT d.classid, d.objid, d.objsubid
    FROM pg_depend d, ext
    WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid
      AND d.deptype = 'e'
), rel AS (
    SELECT c.oid, c.relname, c.relkind, c.relacl
    FROM pg_class c JOIN member m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
), func AS (
    SELECT p.oid, p.proacl
    FROM pg_proc p JOIN member m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
)
SELECT line FROM (
    SELECT 'member ' || pg_describe_object(classid, objid, objsubid) FROM member
    UNION ALL
    SELECT format('column %s.%s #%s %s%s%s', r.relname, a.attname,
                  row_number() OVER (PARTITION BY r.oid ORDER BY a.attnum),
                  format_type(a.atttypid, a.atttypmod),
                  CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END,
                  coalesce(' DEFAULT ' || pg_get_expr(ad.adbin, ad.adrelid), ''))
    FROM rel r
    JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef ad ON ad.adrelid = r.oid AND ad.adnum = a.attnum
    UNION ALL
    SELECT format('constraint %s.%s %s', r.relname, co.conname, pg_get_constraintdef(co.oid))
    FROM rel r JOIN pg_constraint co ON co.conrelid = r.oid
    UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid)
    FROM rel r JOIN pg_index i ON i.indrelid = r.oid
    UNION ALL
    SELECT 'trigger ' || pg_get_triggerdef(t.oid)
    FROM rel r JOIN pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal
    UNION ALL
    SELECT format('view %s %s', r.relname, pg_get_viewdef(r.oid))
    FROM rel r WHERE r.relkind = 'v'
    UNION ALL
    SELECT format('function %s', pg_get_functiondef(f.oid)) FROM func f
    UNION ALL
    SELECT format('privileges %s %s', r.relname,
                  (SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(r.relacl) x))
    FROM rel r
    UNION ALL
    SELECT format('privileges %s %s', f.oid::regprocedure,
                  (SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(f.proacl) x))
    FROM func f
    UNION ALL
    SELECT format('comment %s %s', pg_describe_object(m.classid, m.objid, m.objsubid), ds.description)
    FROM member m
    JOIN pg_description ds ON ds.classoid = m.classid AND ds.objoid = m.objid
    UNION ALL
    SELECT format('dumped %s %s', cfg::regclass, cond)
    FROM ext, unnest(ext.extconfig, ext.extcondition) AS u(cfg, cond)
) lines(line)
ORDER BY line COLLATE "C";
