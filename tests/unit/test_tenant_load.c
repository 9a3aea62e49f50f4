/* util/tenant_load: per-tenant counts of requests in progress. */
#include "unit.h"
#include "util/tenant_load.h"

TEST(bound_per_tenant) {
  struct tenant_loads t;
  CHECK(tenant_loads_init(&t, 4) == 0);
  unsigned r, e;
  CHECK(tenant_load_acquire(&t, "t_a", 2, false, 0, &r, &e) == TL_OK);
  CHECK(tenant_load_acquire(&t, "t_a", 2, false, 0, &r, &e) == TL_OK && r == 1);
  CHECK(tenant_load_acquire(&t, "t_a", 2, false, 0, &r, &e) == TL_OVER_REQ && r == 2);
  /* Another tenant has its own count. */
  CHECK(tenant_load_acquire(&t, "t_b", 2, false, 0, &r, &e) == TL_OK && r == 0);
  tenant_load_release(&t, "t_a", false);
  CHECK(tenant_load_acquire(&t, "t_a", 2, false, 0, &r, &e) == TL_OK && r == 1);
  tenant_load_release(&t, "t_a", false);
  tenant_load_release(&t, "t_a", false);
  tenant_load_release(&t, "t_b", false);
  CHECK(t.n == 0);
  tenant_loads_free(&t);
}

TEST(execs_within_requests) {
  struct tenant_loads t;
  CHECK(tenant_loads_init(&t, 4) == 0);
  unsigned r, e;
  CHECK(tenant_load_acquire(&t, "t_a", 3, true, 1, &r, &e) == TL_OK);
  CHECK(tenant_load_acquire(&t, "t_a", 3, true, 1, &r, &e) == TL_OVER_EXEC && e == 1);
  CHECK(tenant_load_acquire(&t, "t_a", 3, false, 1, &r, &e) == TL_OK && r == 1);
  tenant_load_release(&t, "t_a", true);
  CHECK(tenant_load_acquire(&t, "t_a", 3, true, 1, &r, &e) == TL_OK && e == 0);
  tenant_load_release(&t, "t_a", true);
  tenant_load_release(&t, "t_a", false);
  CHECK(t.n == 0);
  tenant_loads_free(&t);
}

TEST(full_table_and_long_ids) {
  struct tenant_loads t;
  CHECK(tenant_loads_init(&t, 1) == 0);
  unsigned r, e;
  CHECK(tenant_load_acquire(&t, "t_a", 5, false, 0, &r, &e) == TL_OK);
  CHECK(tenant_load_acquire(&t, "t_b", 5, false, 0, &r, &e) == TL_FULL);
  char id[TENANT_LOAD_ID_SIZE + 1];
  memset(id, 'x', sizeof id - 1);
  id[sizeof id - 1] = 0;
  CHECK(tenant_load_acquire(&t, id, 5, false, 0, &r, &e) == TL_FULL);
  tenant_load_release(&t, "t_a", false);
  CHECK(tenant_load_acquire(&t, "t_b", 5, false, 0, &r, &e) == TL_OK);
  tenant_load_release(&t, "t_b", false);
  tenant_loads_free(&t);
}

TEST(bound_of_a_tenant) {
  CHECK(tenant_load_bound(-1, 7) == 7); /* the store's "default" */
  CHECK(tenant_load_bound(0, 7) == 7);
  CHECK(tenant_load_bound(3, 7) == 3);
  CHECK(tenant_load_bound((int64_t)UINT32_MAX + 1, 7) == 7);
}

int main(void) {
  RUN(bound_per_tenant);
  RUN(execs_within_requests);
  RUN(full_table_and_long_ids);
  RUN(bound_of_a_tenant);
  return unit_done();
}
