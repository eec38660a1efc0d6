-- name: login_role
-- Who the connection works as, whether row-level security holds it, and whether it may become
-- the application role (a superuser always may). Nothing when the role does not exist yet.
select current_user as login,
       r.rolsuper or r.rolbypassrls as bypasses_rls,
       current_user = %(role)s as is_app_role,
       pg_has_role(current_user, a.oid, 'MEMBER') as can_become
  from pg_roles r, pg_roles a
 where r.rolname = current_user and a.rolname = %(role)s;

-- name: become_app_role
set role fairqueue_app;
