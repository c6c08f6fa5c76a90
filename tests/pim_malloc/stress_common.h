/* Shared by the stress kernel (dpu/stress.c) and its host test. */
#ifndef PIMM_STRESS_COMMON_H
#define PIMM_STRESS_COMMON_H
#define SLOTS 40
#define TASKLETS 16
#endif
