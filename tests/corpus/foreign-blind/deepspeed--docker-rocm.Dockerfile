FROM rocm/pytorch:latest

# install latest released version of deepspeed
RUN pip install deepspeed && \
    ds_report
