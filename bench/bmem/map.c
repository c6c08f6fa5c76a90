int nm_suite_bmem_map(void*b){(void)b;return 0;}
