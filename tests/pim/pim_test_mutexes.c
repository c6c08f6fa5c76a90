/* 57 mutexes: one more than the DPU has, so dpu_load must refuse it. */
#include "nearmem/pim/dpu.h"

DPU_PROGRAM(pim_test_mutexes);
#define M8(p) MUTEX_INIT(p##0); MUTEX_INIT(p##1); MUTEX_INIT(p##2); MUTEX_INIT(p##3); \
    MUTEX_INIT(p##4); MUTEX_INIT(p##5); MUTEX_INIT(p##6); MUTEX_INIT(p##7)
M8(ma); M8(mb); M8(mc); M8(md); M8(me_); M8(mf); M8(mg);
MUTEX_INIT(mlast);

int DPU_MAIN(void)
{
    mutex_lock(mlast);
    mutex_unlock(mlast);
    return 0;
}
