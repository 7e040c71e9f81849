#!/usr/bin/env python
# DeepSpeed copies its utils/zero_to_fp32.py beside `latest` at every save_checkpoint.
