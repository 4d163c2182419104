--
-- PostgreSQL database dump
--

\restrict MICFLBGTLzDoBziwWxHdmogWCPPzyQ5rIcHXqaGwC1Zwugo3Ccv0QbgFC8mlWB0

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: hpcprobe_meta; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.hpcprobe_meta (
    key text NOT NULL,
    value text NOT NULL
);


--
-- Name: kept_results; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.kept_results (
    kind text NOT NULL,
    key text NOT NULL,
    digest text NOT NULL,
    value text NOT NULL
);


--
-- Name: metrics; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.metrics (
    metric_id bigint NOT NULL,
    run_id text NOT NULL,
    seq integer NOT NULL,
    benchmark text NOT NULL,
    name text NOT NULL,
    unit text NOT NULL,
    better text NOT NULL,
    params text NOT NULL,
    median double precision,
    ci_low double precision,
    ci_high double precision,
    params_md5 text GENERATED ALWAYS AS (md5(params)) STORED,
    samples bytea
);


--
-- Name: metrics_metric_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.metrics_metric_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: metrics_metric_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.metrics_metric_id_seq OWNED BY public.metrics.metric_id;


--
-- Name: runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs (
    run_id text NOT NULL,
    created text NOT NULL,
    host text NOT NULL,
    tag text,
    profile text NOT NULL,
    benchmarks text NOT NULL,
    duration_s double precision NOT NULL,
    schema_version integer NOT NULL,
    provenance text NOT NULL,
    topology text NOT NULL,
    findings text NOT NULL,
    warnings text NOT NULL,
    errors text NOT NULL,
    inserted bigint NOT NULL,
    kind text DEFAULT 'node'::text NOT NULL,
    interrupted integer DEFAULT 0 NOT NULL
);


--
-- Name: runs_inserted_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.runs_inserted_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: runs_inserted_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.runs_inserted_seq OWNED BY public.runs.inserted;


--
-- Name: series_kept; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.series_kept (
    figure text NOT NULL,
    upto bigint NOT NULL,
    n bigint NOT NULL
);


--
-- Name: series_rows; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.series_rows (
    figure text NOT NULL,
    host text NOT NULL,
    part integer NOT NULL,
    unit text NOT NULL,
    better text NOT NULL,
    runs text NOT NULL,
    created text NOT NULL,
    tags text NOT NULL,
    numbers text NOT NULL
);


--
-- Name: metrics metric_id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.metrics ALTER COLUMN metric_id SET DEFAULT nextval('public.metrics_metric_id_seq'::regclass);


--
-- Name: runs inserted; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs ALTER COLUMN inserted SET DEFAULT nextval('public.runs_inserted_seq'::regclass);


--
-- Data for Name: hpcprobe_meta; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.hpcprobe_meta VALUES ('store_version', '7');


--
-- Data for Name: kept_results; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: metrics; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.metrics VALUES (1, 'a0000000000a', 0, 'memory', 'bandwidth', 'GB/s', 'higher', '{"cpus": "0-127", "in_sweep": false, "isa": "avx512", "kernel": "triad", "level": "DRAM", "phase": "stream", "placement": "one-per-core", "size_bytes": 2147483648, "stores": "regular", "threads": 128}', 600.5, 598, 603, DEFAULT, '\x4082c000000000004082d000000000004082b000000000004082c800000000004082b800000000004082d80000000000');
INSERT INTO public.metrics VALUES (2, 'a0000000000a', 1, 'memory', 'bandwidth', 'GB/s', 'higher', '{"cpus": "0-127", "in_sweep": false, "isa": "avx512", "kernel": "copy", "level": "DRAM", "phase": "stream", "placement": "one-per-core", "size_bytes": 2147483648, "stores": "regular", "threads": 128}', 590.5, 588, 593, DEFAULT, '\x408270000000000040828000000000004082600000000000408278000000000040826800000000004082880000000000');
INSERT INTO public.metrics VALUES (3, 'a0000000000a', 2, 'latency', 'latency', 'ns', 'lower', '{"cpu": 0, "cpu_domain": 0, "level": "DRAM", "load_threads": 0, "memory_domain": 0, "page_size": "4KiB", "size_bytes": 1073741824}', 110, 109, 111, DEFAULT, '\x405b800000000000405bc00000000000405b400000000000');
INSERT INTO public.metrics VALUES (4, 'b0000000000b', 0, 'memory', 'bandwidth', 'GB/s', 'higher', '{"cpus": "0-63,64-127", "in_sweep": false, "isa": "avx512", "kernel": "triad", "level": "DRAM", "phase": "stream", "placement": "one-per-core", "size_bytes": 2147483648, "stores": "regular", "threads": 128}', 678.5, 676, 681, DEFAULT, '\x408530000000000040854400000000004085200000000000408538000000000040852c00000000004085480000000000');
INSERT INTO public.metrics VALUES (5, 'b0000000000b', 1, 'memory', 'bandwidth', 'GB/s', 'higher', '{"cpus": "0-127", "in_sweep": false, "isa": "avx512", "kernel": "copy", "level": "DRAM", "phase": "stream", "placement": "one-per-core", "size_bytes": 2147483648, "stores": "regular", "threads": 128}', 590.5, 588, 593, DEFAULT, '\x408278000000000040826800000000004082880000000000408260000000000040828000000000004082700000000000');
INSERT INTO public.metrics VALUES (6, 'b0000000000b', 2, 'latency', 'latency', 'ns', 'lower', '{"cpu": 0, "cpu_domain": 0, "level": "DRAM", "load_threads": 0, "memory_domain": 0, "page_size": "4KiB", "size_bytes": 1073741824}', 121, 120, 122, DEFAULT, '\x405e400000000000405e000000000000405e800000000000');
INSERT INTO public.metrics VALUES (7, 'b0000000000b', 3, 'memory', 'bandwidth', 'GB/s', 'higher', '{"cpus": "0-127", "in_sweep": false, "isa": "avx512", "kernel": "triad", "level": "DRAM", "phase": "stream", "placement": "one-per-core", "size_bytes": 2147483648, "stores": "regular", "threads": 8}', 300, 300, 300, DEFAULT, '\x4072c000000000004072c000000000004072c000000000004072c000000000004072c00000000000');


--
-- Data for Name: runs; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.runs VALUES ('a0000000000a', '2026-11-01T10:00:00+00:00', 'vm', 'nps1', 'quick', '["memory"]', 0.815, 1, '{"host": "vm", "cpu_model": "Intel(R) Xeon(R) Processor", "cpu_flags": ["3dnowprefetch", "abm", "adx", "aes", "amx_bf16", "amx_int8", "amx_tile", "apic", "arat", "arch_capabilities", "avx", "avx2", "avx512_bf16", "avx512_bitalg", "avx512_fp16", "avx512_vbmi2", "avx512_vnni", "avx512_vpopcntdq", "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512ifma", "avx512vbmi", "avx512vl", "avx_vnni", "bmi1", "bmi2", "cldemote", "clflush", "clflushopt", "clwb", "cmov", "constant_tsc", "cpuid", "cpuid_fault", "cx16", "cx8", "de", "erms", "f16c", "fma", "fpu", "fsgsbase", "fsrm", "fxsr", "gfni", "hle", "ht", "hypervisor", "invpcid", "lahf_lm", "lm", "mca", "mce", "mmx", "movbe", "movdir64b", "movdiri", "msr", "mtrr", "nonstop_tsc", "nopl", "nx", "pae", "pat", "pcid", "pclmulqdq", "pdpe1gb", "pge", "pni", "popcnt", "pse", "pse36", "rdpid", "rdrand", "rdseed", "rdtscp", "rep_good", "rtm", "sep", "serialize", "sha_ni", "smap", "smep", "ss", "sse", "sse2", "sse4_1", "sse4_2", "ssse3", "syscall", "tsc", "tsc_adjust", "tsc_deadline_timer", "tsc_known_freq", "tsxldtrk", "umip", "vaes", "vme", "vpclmulqdq", "x2apic", "xgetbv1", "xsave", "xsavec", "xsaveopt", "xsaves", "xtopology"], "kernel": "Linux 6.18.44-fc-v669", "machine": "x86_64", "smt": 1, "smt_active": false, "numa_nodes": 1, "numa_per_package": 1, "l3_as_numa": false, "tuned_profile": null, "dmi": {}, "blas": "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0", "mpi_found": "Open MPI 4.1.4 (/usr)", "thp": "madvise", "thp_defrag": "madvise", "governor": null, "cpufreq": null, "compiler": "gcc 12.2.0; flags:  -O3 -DNDEBUG -O3 -std=gnu11", "isa_supported": ["scalar", "avx2", "avx512"], "isa": "avx512", "hpcprobe_version": "0.1.0", "python": "3.11.7", "topology_source": "hwloc", "allowed_cpus": "0-1", "environment": {}}', '{"source": "hwloc", "cpu_model": "Intel(R) Xeon(R) Processor", "counts": {"packages": 1, "numa_nodes": 1, "l3_domains": 1, "cores": 2, "pus": 2}, "smt": 1, "allowed_cpus": "0-1", "packages": [{"index": 0, "os_index": 0, "cpus": "0-1"}], "numa_nodes": [{"index": 0, "os_index": 0, "cpus": "0-1", "memory_bytes": 10026692608}], "l3_domains": [{"index": 0, "os_index": null, "cpus": "0-1", "size_bytes": 503316480}], "cores": [{"index": 0, "os_index": 0, "cpus": "0"}, {"index": 1, "os_index": 1, "cpus": "1"}], "caches": [{"level": 1, "size_bytes": 49152, "line_bytes": 64, "instances": 2, "pus_per_instance": 1}, {"level": 2, "size_bytes": 2097152, "line_bytes": 64, "instances": 2, "pus_per_instance": 1}, {"level": 3, "size_bytes": 503316480, "line_bytes": 64, "instances": 1, "pus_per_instance": 2}]}', '[]', '[]', '[]', 1, 'node', 0);
INSERT INTO public.runs VALUES ('b0000000000b', '2026-11-02T10:00:00+00:00', 'vm', 'nps4', 'quick', '["memory"]', 0.815, 1, '{"host": "vm", "cpu_model": "Intel(R) Xeon(R) Processor", "cpu_flags": ["3dnowprefetch", "abm", "adx", "aes", "amx_bf16", "amx_int8", "amx_tile", "apic", "arat", "arch_capabilities", "avx", "avx2", "avx512_bf16", "avx512_bitalg", "avx512_fp16", "avx512_vbmi2", "avx512_vnni", "avx512_vpopcntdq", "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512ifma", "avx512vbmi", "avx512vl", "avx_vnni", "bmi1", "bmi2", "cldemote", "clflush", "clflushopt", "clwb", "cmov", "constant_tsc", "cpuid", "cpuid_fault", "cx16", "cx8", "de", "erms", "f16c", "fma", "fpu", "fsgsbase", "fsrm", "fxsr", "gfni", "hle", "ht", "hypervisor", "invpcid", "lahf_lm", "lm", "mca", "mce", "mmx", "movbe", "movdir64b", "movdiri", "msr", "mtrr", "nonstop_tsc", "nopl", "nx", "pae", "pat", "pcid", "pclmulqdq", "pdpe1gb", "pge", "pni", "popcnt", "pse", "pse36", "rdpid", "rdrand", "rdseed", "rdtscp", "rep_good", "rtm", "sep", "serialize", "sha_ni", "smap", "smep", "ss", "sse", "sse2", "sse4_1", "sse4_2", "ssse3", "syscall", "tsc", "tsc_adjust", "tsc_deadline_timer", "tsc_known_freq", "tsxldtrk", "umip", "vaes", "vme", "vpclmulqdq", "x2apic", "xgetbv1", "xsave", "xsavec", "xsaveopt", "xsaves", "xtopology"], "kernel": "Linux 6.18.44-fc-v669", "machine": "x86_64", "smt": 1, "smt_active": false, "numa_nodes": 1, "numa_per_package": 4, "l3_as_numa": false, "tuned_profile": null, "dmi": {}, "blas": "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0", "mpi_found": "Open MPI 4.1.4 (/usr)", "thp": "madvise", "thp_defrag": "madvise", "governor": null, "cpufreq": null, "compiler": "gcc 12.2.0; flags:  -O3 -DNDEBUG -O3 -std=gnu11", "isa_supported": ["scalar", "avx2", "avx512"], "isa": "avx512", "hpcprobe_version": "0.1.0", "python": "3.11.7", "topology_source": "hwloc", "allowed_cpus": "0-1", "environment": {"OMP_PROC_BIND": "close"}}', '{"source": "hwloc", "cpu_model": "Intel(R) Xeon(R) Processor", "counts": {"packages": 1, "numa_nodes": 1, "l3_domains": 1, "cores": 2, "pus": 2}, "smt": 1, "allowed_cpus": "0-1", "packages": [{"index": 0, "os_index": 0, "cpus": "0-1"}], "numa_nodes": [{"index": 0, "os_index": 0, "cpus": "0-1", "memory_bytes": 10026692608}], "l3_domains": [{"index": 0, "os_index": null, "cpus": "0-1", "size_bytes": 503316480}], "cores": [{"index": 0, "os_index": 0, "cpus": "0"}, {"index": 1, "os_index": 1, "cpus": "1"}], "caches": [{"level": 1, "size_bytes": 49152, "line_bytes": 64, "instances": 2, "pus_per_instance": 1}, {"level": 2, "size_bytes": 2097152, "line_bytes": 64, "instances": 2, "pus_per_instance": 1}, {"level": 3, "size_bytes": 503316480, "line_bytes": 64, "instances": 1, "pus_per_instance": 2}]}', '[]', '[]', '[]', 2, 'node', 0);


--
-- Data for Name: series_kept; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: series_rows; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Name: metrics_metric_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.metrics_metric_id_seq', 7, true);


--
-- Name: runs_inserted_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.runs_inserted_seq', 2, true);


--
-- Name: hpcprobe_meta hpcprobe_meta_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.hpcprobe_meta
    ADD CONSTRAINT hpcprobe_meta_pkey PRIMARY KEY (key);


--
-- Name: kept_results kept_results_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.kept_results
    ADD CONSTRAINT kept_results_pkey PRIMARY KEY (kind, key);


--
-- Name: metrics metrics_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.metrics
    ADD CONSTRAINT metrics_pkey PRIMARY KEY (metric_id);


--
-- Name: runs runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (run_id);


--
-- Name: series_kept series_kept_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.series_kept
    ADD CONSTRAINT series_kept_pkey PRIMARY KEY (figure);


--
-- Name: series_rows series_rows_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.series_rows
    ADD CONSTRAINT series_rows_pkey PRIMARY KEY (figure, host, part);


--
-- Name: metrics_figure_md5; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX metrics_figure_md5 ON public.metrics USING btree (benchmark, name, params_md5, metric_id);


--
-- Name: metrics_name; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX metrics_name ON public.metrics USING btree (benchmark, name);


--
-- Name: metrics_run; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX metrics_run ON public.metrics USING btree (run_id);


--
-- Name: runs_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_created ON public.runs USING btree (created);


--
-- Name: runs_host; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_host ON public.runs USING btree (host);


--
-- Name: runs_id_when; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_id_when ON public.runs USING btree (run_id, created, host, tag);


--
-- Name: runs_marked; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_marked ON public.runs USING btree (run_id) WHERE ((findings <> '[]'::text) OR (interrupted = 1));


--
-- Name: runs_tag; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_tag ON public.runs USING btree (tag);


--
-- Name: runs_when; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_when ON public.runs USING btree (created, host, tag, run_id);


--
-- Name: metrics metrics_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.metrics
    ADD CONSTRAINT metrics_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(run_id) ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--

\unrestrict MICFLBGTLzDoBziwWxHdmogWCPPzyQ5rIcHXqaGwC1Zwugo3Ccv0QbgFC8mlWB0

